"""Exporting a federated model, which every party must agree to (each reveals its thresholds)."""

from .categories import recode
from .xgboost_json import export_part, export_xgboost, merge_parts, split_condition

__all__ = ["export_part", "merge_parts", "export_xgboost", "split_condition", "recode"]
