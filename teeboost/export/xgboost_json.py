"""Joint export to XGBoost's JSON model format, by agreement of every party.

A federated model has no single owner of its thresholds: each party keeps its own. Exporting
is therefore two steps. Each party writes its *part* (:func:`export_part`): its split records
with feature names, raw thresholds, missing directions and category names. Handing that over
is the party's agreement to reveal its thresholds. The active party's part also carries the
trees (owner and record id per split, leaf values, gains, covers), the objective, base
margins and classes. Whoever collects every part merges them (:func:`merge_parts`) into the
document ``xgboost.Booster.save_model("model.json")`` writes (schema of xgboost
``XGBOOST_VERSION``), over the joined table: the active party's features first, then each
passive party's, by party index.

Rules of the translation (docs/explain.md):

- we send ``x <= threshold`` left in float64; XGBoost sends ``float32(x) < split_condition``
  left. ``split_condition = nextafter(float32(threshold), +inf)`` makes XGBoost's rule
  ``float32(x) <= float32(threshold)``, which agrees except for a value just above the
  threshold that rounds to the same float32 (XGBoost then goes left, we go right);
- missing values follow ``default_left`` = our missing direction;
- categorical splits become XGBoost's category sets (``split_type`` 1), which list the codes
  that go *right*; feature type "c". The model carries each vocabulary's names (XGBoost's
  ``cats``, :mod:`.categories`), so XGBoost codes a pandas frame's categories by name, never by
  the frame's own order, and refuses names it was not given;
- the base margin becomes ``base_score`` in XGBoost's output space (probability for binary,
  mean for Poisson); multiclass base margins are added to the leaves of each class's first
  tree and ``base_score`` is 0.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.model import Ensemble
from ..core.tree import SplitRecord, Tree
from ..errors import ModelFileError
from ..parties.active import ensemble_digest
from ..model_files import ActiveModel, PassiveModel
from .categories import ATTRIBUTE, category_container, category_names

if TYPE_CHECKING:
    from ..federation import FederatedModel

__all__ = ["PART_FORMAT", "PART_VERSION", "XGBOOST_VERSION", "export_part", "merge_parts", "export_xgboost",
           "split_condition"]

PART_FORMAT = "teeboost-export-part"
PART_VERSION = 1
XGBOOST_VERSION = (3, 2, 0)  # the release whose model schema merge_parts writes (and the tests load)
_NO_PARENT = 2147483647  # XGBoost's parent id of a root

_OBJECTIVES = {
    "binary": {"name": "binary:logistic", "reg_loss_param": {"scale_pos_weight": "1"}},
    "regression": {"name": "reg:squarederror", "reg_loss_param": {"scale_pos_weight": "1"}},
    "poisson": {"name": "count:poisson", "poisson_regression_param": {"max_delta_step": "0.699999988"}},
    "multiclass": {"name": "multi:softprob", "softmax_multiclass_param": {"num_class": None}},
    "tweedie": {"name": "reg:tweedie", "tweedie_regression_param": {"tweedie_variance_power": None}},
    "gamma": {"name": "reg:gamma", "reg_loss_param": {"scale_pos_weight": "1"}},
    "pseudohuber": {"name": "reg:pseudohubererror", "pseudo_huber_param": {"huber_slope": None}},
}
#: Objectives whose prediction is exp(margin): XGBoost's base_score is then the mean, exp(base margin).
_LOG_LINK = ("poisson", "tweedie", "gamma")


def split_condition(threshold: float) -> float:
    """XGBoost's ``split_condition`` for our ``x <= threshold``: the float32 just above
    float32(threshold), so that ``float32(x) < condition`` iff ``float32(x) <= float32(threshold)``."""
    return float(np.nextafter(np.float32(threshold), np.float32(np.inf)))


# ---- parts: what each party agrees to reveal ------------------------------------------------

def export_part(party_model: ActiveModel | PassiveModel) -> dict[str, Any]:
    """One party's part of a joint export: its split records, named by feature (and category),
    and for the active party the trees and what prediction needs besides thresholds."""
    if isinstance(party_model, ActiveModel):
        index, name = 0, "active"
    else:
        party_model.require_records("export")
        index, name = party_model.index, party_model.name
    features = []
    for feature in party_model.feature_names:
        vocabulary = party_model.vocabularies.get(feature)
        features.append({"name": feature} if vocabulary is None else
                        {"name": feature, "categories": list(vocabulary.names), "other": vocabulary.other})
    records = [_record_entry(record_id, record, party_model) for record_id, record in party_model.owner.items()]
    digest = (ensemble_digest(party_model.ensemble) if isinstance(party_model, ActiveModel)
              else party_model.model_digest)
    part: dict[str, Any] = {"format": PART_FORMAT, "version": PART_VERSION,
                            "role": "active" if index == 0 else "passive", "party": index, "name": name,
                            "model_digest": digest, "features": features, "records": records}
    if isinstance(party_model, ActiveModel):
        ensemble = party_model.ensemble
        part.update({
            "protocol": party_model.protocol,
            "passive_parties": [{"index": i, "name": n} for i, n in sorted(party_model.passive_parties.items())],
            "objective": ensemble.objective,
            **({"objective_params": dict(ensemble.objective_params)} if ensemble.objective_params else {}),
            "base_margin": [float(v) for v in ensemble.base_margin],
            "classes": ensemble.classes,
            "trees": [{key: value for key, value in tree.to_dict().items() if key != "n_rows"}
                      for tree in ensemble.trees],
        })
    return part


def _record_entry(record_id: int, record: SplitRecord, party_model: ActiveModel | PassiveModel) -> dict[str, Any]:
    feature = party_model.feature_names[record.feature]
    entry: dict[str, Any] = {"id": record_id, "tree": record.tree, "feature": feature,
                             "missing_left": record.missing_left}
    if not record.categorical:
        entry["threshold"] = record.threshold
        return entry
    vocabulary = party_model.vocabularies.get(feature)
    if vocabulary is None:
        raise ModelFileError(f"split record {record_id} splits {feature!r} by categories, but the party holds no "
                             "categories for that feature")
    codes = [c for c in range(vocabulary.n_codes) if (record.categories >> c) & 1]
    # names of the categories that go left; null stands for "every other category"
    entry["categories_left"] = [vocabulary.names[c] if c < len(vocabulary.names) else None for c in codes]
    return entry


# ---- merge: every part into one XGBoost model ------------------------------------------------

class _Party:
    """One part, read and checked: joined feature index and category codes per record."""

    def __init__(self, part: dict[str, Any], offset: int) -> None:
        where = f"part of party {part.get('party')!r} ({part.get('name')!r})"
        try:
            self.index, self.name = int(part["party"]), str(part["name"])
            self.features = [str(f["name"]) for f in part["features"]]
            self.vocabularies = {str(f["name"]): ([str(c) for c in f["categories"]], bool(f["other"]))
                                 for f in part["features"] if "categories" in f}
            position = {name: offset + i for i, name in enumerate(self.features)}
            # record id -> (tree, joined feature index, feature name, threshold, missing left, left codes or None)
            self.records: dict[int, tuple[int, int, str, float, bool, list[int] | None]] = {}
            for entry in part["records"]:
                feature = str(entry["feature"])
                if feature not in position:
                    raise ModelFileError(f"{where}: record {entry['id']} names unknown feature {feature!r}")
                codes = None
                threshold = 0.0
                if "categories_left" in entry:
                    codes = self._codes(feature, entry["categories_left"], where)
                else:
                    threshold = float(entry["threshold"])
                self.records[int(entry["id"])] = (int(entry["tree"]), position[feature], feature, threshold,
                                                  bool(entry["missing_left"]), codes)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"malformed {where}: {exc}") from None

    def _codes(self, feature: str, names: list[Any], where: str) -> list[int]:
        if feature not in self.vocabularies:
            raise ModelFileError(f"{where}: categorical record on {feature!r}, which has no categories")
        categories, other = self.vocabularies[feature]
        code = {name: i for i, name in enumerate(categories)}
        if other:
            code[None] = len(categories)
        unknown = [n for n in names if n not in code]
        if unknown:
            raise ModelFileError(f"{where}: categories {unknown!r} are not categories of {feature!r}")
        return sorted(code[n] for n in names)

    def n_codes(self, feature: str) -> int:
        categories, other = self.vocabularies[feature]
        return len(categories) + other


def _check_part(part: Any) -> dict[str, Any]:
    if not isinstance(part, dict) or part.get("format") != PART_FORMAT:
        raise ModelFileError("not a teeboost export part")
    if part.get("version") != PART_VERSION:
        raise ModelFileError(f"export part version {part.get('version')!r}; this teeboost reads {PART_VERSION}")
    return part


def _order_parts(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The active part and the passive parts in the active part's index order; every party
    named by the active part must have given its part, and nobody else."""
    parts = [_check_part(p) for p in parts]
    actives = [p for p in parts if p.get("role") == "active"]
    if len(actives) != 1:
        raise ModelFileError(f"a joint export needs exactly one active party's part, got {len(actives)}")
    active = actives[0]
    try:
        expected = {int(p["index"]): str(p["name"]) for p in active["passive_parties"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"malformed active part: {exc}") from None
    given: dict[int, dict[str, Any]] = {}
    for part in parts:
        if part is active:
            continue
        index = part.get("party")
        if index not in expected or expected[index] != part.get("name"):
            raise ModelFileError(f"part of party {index!r} ({part.get('name')!r}) is not a passive party of this "
                                 f"model ({', '.join(f'{i} ({n})' for i, n in sorted(expected.items()))})")
        if index in given:
            raise ModelFileError(f"two parts for passive party {index} ({expected[index]})")
        given[index] = part
    missing = [f"{i} ({n})" for i, n in sorted(expected.items()) if i not in given]
    if missing:
        raise ModelFileError(f"no part from passive parties {', '.join(missing)}: every party must export its part")
    passives = [given[i] for i in sorted(expected)]
    _check_same_model(active, passives)
    return active, passives


def _check_same_model(active: dict[str, Any], passives: list[dict[str, Any]]) -> None:
    """Every part belongs to the one model the active part's trees are: each passive party kept
    the digest of those trees with its records at the end of training, and its records are
    exactly the ones the trees name."""
    digest = active.get("model_digest")
    for part in passives:
        theirs = part.get("model_digest")
        if not theirs:
            raise ModelFileError(f"the part of passive party {part['party']} ({part['name']}) names no model; its "
                                 "model file predates model digests: retrain to export")
        if theirs != digest:
            raise ModelFileError(f"the part of passive party {part['party']} ({part['name']}) belongs to another "
                                 f"model (digest {str(theirs)[:16]}..., the active party's trees {str(digest)[:16]}...)")
        try:
            named = {int(t["record"][n]) for t in active["trees"] for n in range(len(t["left"]))
                     if int(t["party"][n]) == part["party"]}
            held = {int(r["id"]) for r in part["records"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"malformed part: {exc}") from None
        if named != held:
            raise ModelFileError(f"passive party {part['party']} ({part['name']}) gave {len(held)} split records, "
                                 f"the trees name {len(named)} of its records: the parts do not fit together")


def merge_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Every party's part -> the XGBoost JSON model (a dict for ``json.dump``) over the joined
    table: active party's features first, then each passive party's by index."""
    active_part, passive_parts = _order_parts(parts)
    parties: dict[int, _Party] = {}
    offset = 0
    for part in [active_part, *passive_parts]:
        party = _Party(part, offset)
        parties[party.index] = party
        offset += len(party.features)
    names = [name for party in parties.values() for name in party.features]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ModelFileError(f"features {repeated} appear in more than one party's part; XGBoost needs distinct names")
    types = ["c" if name in party.vocabularies else "float" for party in parties.values() for name in party.features]
    try:
        ensemble = Ensemble.from_dict({**active_part, "trees": [{**t, "n_rows": [0] * len(t["left"])}
                                                                for t in active_part["trees"]]})
    except (KeyError, TypeError) as exc:
        raise ModelFileError(f"malformed active part: {exc}") from None
    objective = dict(_objective(ensemble.objective))
    trees, base_score = _fold_base_margin(ensemble)
    if "softmax_multiclass_param" in objective:
        objective["softmax_multiclass_param"] = {"num_class": str(ensemble.n_outputs)}
    for section in ("tweedie_regression_param", "pseudo_huber_param"):
        if section in objective:  # the loss's parameter as XGBoost writes a float32
            (key,) = objective[section]
            loss_params = ensemble.loss.params
            objective[section] = {key: f"{np.float32(loss_params[key]):.9g}"}
    n_features = len(names)
    tree_json = [_tree_json(i, tree, parties, n_features) for i, tree in enumerate(trees)]
    outputs = [tree.output for tree in trees]
    k = ensemble.n_outputs
    round_robin = len(trees) % k == 0 and outputs == [i % k for i in range(len(trees))]
    step = k if round_robin else 1
    named = category_names(names, {f: v for party in parties.values() for f, v in party.vocabularies.items()})
    attributes = {"teeboost_classes": json.dumps(ensemble.classes)} if ensemble.classes else {}
    if named:
        attributes[ATTRIBUTE] = json.dumps(named)
    return {
        "learner": {
            "attributes": attributes,
            "feature_names": names,
            "feature_types": types,
            "gradient_booster": {
                "model": {
                    "cats": category_container(names, named),
                    "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(trees))},
                    "iteration_indptr": list(range(0, len(trees) + 1, step)),
                    "tree_info": outputs,
                    "trees": tree_json,
                },
                "name": "gbtree",
            },
            "learner_model_param": {
                "base_score": f"[{np.float32(base_score):.8E}]",
                "boost_from_average": "1",
                "num_class": str(k) if ensemble.objective == "multiclass" else "0",
                "num_feature": str(n_features),
                "num_target": "1",
            },
            "objective": objective,
        },
        "version": list(XGBOOST_VERSION),
    }


def _objective(name: str) -> dict[str, Any]:
    if name not in _OBJECTIVES:
        raise ModelFileError(f"objective {name!r} has no XGBoost export (known: {', '.join(_OBJECTIVES)})")
    return _OBJECTIVES[name]


def _fold_base_margin(ensemble: Ensemble) -> tuple[list[Tree], float]:
    """Trees and XGBoost's base_score. Multiclass: each class's base margin moves into the
    leaves of its first tree (a one-leaf tree when it has none), base_score 0."""
    margin = [float(v) for v in ensemble.base_margin]
    if ensemble.objective == "binary":
        return ensemble.trees, 1.0 / (1.0 + np.exp(-margin[0]))
    if ensemble.objective in _LOG_LINK:
        return ensemble.trees, float(np.exp(margin[0]))
    if ensemble.objective != "multiclass":
        return ensemble.trees, margin[0]
    trees = list(ensemble.trees)
    for output, value in enumerate(margin):
        first = next((i for i, t in enumerate(trees) if t.output == output), None)
        if first is None:
            trees.append(Tree(output=output, value=[value], cover=[1.0]))
            continue
        tree = trees[first]
        trees[first] = dataclasses.replace(
            tree, value=[v + value if tree.is_leaf(n) else v for n, v in enumerate(tree.value)])
    return trees, 0.0


def _f32(values: list[float]) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float32)]


def _tree_json(tree_id: int, tree: Tree, parties: dict[int, _Party], n_features: int) -> dict[str, Any]:
    n = tree.n_nodes
    parents = [_NO_PARENT] * n
    split_indices, conditions, default_left, split_type = [0] * n, [0.0] * n, [0] * n, [0] * n
    categories: list[int] = []
    categories_nodes, categories_segments, categories_sizes = [], [], []
    for node in range(n):
        if tree.is_leaf(node):
            conditions[node] = tree.value[node]
            continue
        parents[tree.left[node]] = parents[tree.right[node]] = node
        party = parties.get(tree.party[node])
        if party is None or tree.record[node] not in party.records:
            raise ModelFileError(f"tree {tree_id} node {node}: party {tree.party[node]} gave no split record "
                                 f"{tree.record[node]}")
        record_tree, feature, name, threshold, missing_left, left_codes = party.records[tree.record[node]]
        if record_tree != tree_id:
            raise ModelFileError(f"tree {tree_id} node {node}: party {party.name}'s record {tree.record[node]} "
                                 f"belongs to tree {record_tree}: the parts come from different models")
        split_indices[node], default_left[node] = feature, int(missing_left)
        if left_codes is None:
            conditions[node] = split_condition(threshold)
            continue
        split_type[node] = 1
        right = sorted(set(range(party.n_codes(name))) - set(left_codes))  # XGBoost lists those going right
        categories_nodes.append(node)
        categories_segments.append(len(categories))
        categories_sizes.append(len(right))
        categories.extend(right)
    return {
        "base_weights": _f32(tree.value),
        "categories": categories,
        "categories_nodes": categories_nodes,
        "categories_segments": categories_segments,
        "categories_sizes": categories_sizes,
        "default_left": default_left,
        "id": tree_id,
        "left_children": list(tree.left),
        "loss_changes": _f32(tree.gain),
        "parents": parents,
        "right_children": list(tree.right),
        "split_conditions": _f32(conditions),
        "split_indices": split_indices,
        "split_type": split_type,
        "sum_hessian": _f32(tree.cover),
        "tree_param": {"num_deleted": "0", "num_feature": str(n_features), "num_nodes": str(n),
                       "size_leaf_vector": "1"},
    }


def export_xgboost(model: "FederatedModel") -> dict[str, Any]:
    """In one process, where every part is local: every party's part, merged."""
    return merge_parts([export_part(model.active), *[export_part(p) for p in model.passives]])
