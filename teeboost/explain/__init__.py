"""Explaining a federated model: feature importances and TreeSHAP values, each from one
party's seat (what it holds, plus what others choose to share; docs/explain.md)."""

from .importance import (IMPORTANCE_TYPES, ImportanceShare, PartyImportance, active_importance, importance_share,
                         joint_importances, joint_scores, passive_importance)
from .shap import shap_players, shap_values

__all__ = ["IMPORTANCE_TYPES", "ImportanceShare", "PartyImportance", "active_importance", "passive_importance",
           "importance_share", "joint_scores", "joint_importances", "shap_players", "shap_values"]
