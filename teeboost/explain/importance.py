"""Feature importances as XGBoost's ``get_score`` defines them, seen from one party's seat.

Types: ``weight`` (splits on the feature), ``gain`` and ``cover`` (average loss change and
hessian sum of those splits), ``total_gain`` and ``total_cover`` (their sums).

Who sees what follows who holds what. The active party holds the trees (owner party, gain
and cover of every split) and its own split records: it gets its own features one by one and
every passive party as one entry. A passive party holds only its split records: it can count
splits per own feature, and with an :class:`ImportanceShare` (gain and cover per record id of
that party, which the active party chooses to send) it gets the other types for its own
features too. In one process every part is local, so :func:`joint_scores` scores every
feature of every party, as XGBoost would on the joined table.

Strict models publish no gains or covers (they are statistics of partitions that strict mode
keeps inside the enclaves): only ``weight`` exists for them, anything else is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import IMPORTANCE_TYPES
from ..core.model import Ensemble
from ..errors import ConfigError, ModelFileError
from ..model_files import ActiveModel, PassiveModel, write_atomically

if TYPE_CHECKING:
    from ..federation import FederatedModel

__all__ = ["IMPORTANCE_TYPES", "PartyImportance", "ImportanceShare", "active_importance", "passive_importance",
           "importance_share", "joint_scores", "joint_importances"]

SHARE_FORMAT = "teeboost-importance-share"
SHARE_VERSION = 1


@dataclass(frozen=True)
class PartyImportance:
    """One party's view: scores of its own features that split somewhere (as ``get_score``,
    unused features are absent), and for the active party one score per passive party."""

    importance_type: str
    party: str
    features: dict[str, float]
    parties: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.importance_type, "party": self.party, "features": self.features,
                "parties": self.parties}


@dataclass(frozen=True)
class ImportanceShare:
    """What the active party may hand one passive party: gain and cover of each split that
    party owns, by the record ids that party already holds. Nothing about other parties."""

    party: int
    name: str
    gain: dict[int, float]
    cover: dict[int, float]

    def to_dict(self) -> dict[str, Any]:
        return {"format": SHARE_FORMAT, "version": SHARE_VERSION, "party": self.party, "name": self.name,
                "records": [{"id": r, "gain": self.gain[r], "cover": self.cover[r]} for r in sorted(self.gain)]}

    @classmethod
    def from_dict(cls, data: Any) -> "ImportanceShare":
        if not isinstance(data, dict) or data.get("format") != SHARE_FORMAT:
            raise ModelFileError("not a teeboost importance share file")
        if data.get("version") != SHARE_VERSION:
            raise ModelFileError(f"importance share version {data.get('version')!r}; this teeboost reads "
                                 f"{SHARE_VERSION}")
        try:
            records = [(int(e["id"]), float(e["gain"]), float(e["cover"])) for e in data["records"]]
            return cls(int(data["party"]), str(data["name"]), {r: g for r, g, _ in records},
                       {r: c for r, _, c in records})
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"malformed importance share: {exc}") from None

    def save(self, path: str | Path) -> None:
        write_atomically(Path(path), json.dumps(self.to_dict(), indent=1).encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path) -> "ImportanceShare":
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"{path}: not a readable importance share ({exc})") from None
        try:
            return cls.from_dict(data)
        except ModelFileError as exc:
            raise ModelFileError(f"{path}: {exc}") from None


def check_type(importance_type: str, protocol: str, who: str) -> None:
    """Refuse unknown types, and statistics a strict model never published."""
    if importance_type not in IMPORTANCE_TYPES:
        raise ConfigError(f"importance_type={importance_type!r} must be one of {', '.join(IMPORTANCE_TYPES)}")
    if protocol == "strict" and importance_type != "weight":
        raise ConfigError(
            f"{who}: importance type {importance_type!r} needs split gains and covers, which a strict model does "
            "not publish (they are statistics of partitions that strict mode keeps inside the enclaves); only "
            "'weight' (split counts) exists for strict models")


def score(splits: Iterable[tuple[Any, float, float]], importance_type: str) -> dict[Any, float]:
    """(key, gain, cover) per split -> score per key, in order of first appearance."""
    count: dict[Any, int] = {}
    gain: dict[Any, float] = {}
    cover: dict[Any, float] = {}
    for key, g, c in splits:
        count[key] = count.get(key, 0) + 1
        gain[key] = gain.get(key, 0.0) + g
        cover[key] = cover.get(key, 0.0) + c
    if importance_type == "weight":
        return {k: float(n) for k, n in count.items()}
    if importance_type == "total_gain":
        return gain
    if importance_type == "total_cover":
        return cover
    totals = gain if importance_type == "gain" else cover
    return {k: totals[k] / count[k] for k in count}


def _splits(ensemble: Ensemble) -> Iterable[tuple[int, int, float, float]]:
    """(owner party, record id, gain, cover) of every split in the ensemble."""
    for tree in ensemble.trees:
        for node in range(tree.n_nodes):
            if not tree.is_leaf(node):
                yield tree.party[node], tree.record[node], tree.gain[node], tree.cover[node]


def _ordered(scores: dict[str, float], names: list[str]) -> dict[str, float]:
    return {name: scores[name] for name in names if name in scores}


def active_importance(active: ActiveModel, importance_type: str = "weight") -> PartyImportance:
    """The active party's view: its own features, and one total per passive party."""
    check_type(importance_type, active.protocol, "the active party")

    def key(party: int, record: int) -> tuple[str, str]:
        if party == 0:
            return "feature", active.feature_names[active.owner.get(record).feature]
        return "party", active.passive_parties[party]

    scores = score(((key(p, r), g, c) for p, r, g, c in _splits(active.ensemble)), importance_type)
    features = {name: v for (kind, name), v in scores.items() if kind == "feature"}
    parties = {name: v for (kind, name), v in scores.items() if kind == "party"}
    return PartyImportance(importance_type, "active", _ordered(features, active.feature_names),
                           _ordered(parties, [active.passive_parties[i] for i in sorted(active.passive_parties)]))


def importance_share(active: ActiveModel, party: int | str) -> ImportanceShare:
    """Gain and cover of each split passive party ``party`` (index or name) owns, for it to score
    its own features. The active party decides to send this; it says nothing of other parties."""
    index = party_index(active, party)
    check_type("gain", active.protocol, "importance share")
    gain: dict[int, float] = {}
    cover: dict[int, float] = {}
    for owner, record, g, c in _splits(active.ensemble):
        if owner == index:
            gain[record], cover[record] = g, c
    return ImportanceShare(index, active.passive_parties[index], gain, cover)


def party_index(active: ActiveModel, party: int | str) -> int:
    """A passive party's index from its index or name."""
    for index, name in active.passive_parties.items():
        if party == index or party == name:
            return index
    known = ", ".join(f"{i} ({n})" for i, n in sorted(active.passive_parties.items())) or "none"
    raise ConfigError(f"no passive party {party!r} in this model (passive parties: {known})")


def passive_importance(passive: PassiveModel, importance_type: str = "weight",
                       share: ImportanceShare | None = None) -> PartyImportance:
    """A passive party's view of its own features: split counts from its records alone; the
    other types only with the active party's share for it."""
    who = f"passive party {passive.index} ({passive.name})"
    check_type(importance_type, passive.protocol, who)
    passive.require_records("importance")
    records = passive.owner.items()
    if importance_type == "weight":
        splits = ((passive.feature_names[rec.feature], 0.0, 0.0) for _, rec in records)
    else:
        if share is None:
            raise ConfigError(f"{who} holds only its split records: importance type {importance_type!r} needs the "
                              "gains and covers the active party shares with it (an importance share file)")
        _check_share(share, passive, who)
        splits = ((passive.feature_names[rec.feature], share.gain[r], share.cover[r]) for r, rec in records)
    return PartyImportance(importance_type, passive.name, _ordered(score(splits, importance_type),
                                                                   passive.feature_names))


def _check_share(share: ImportanceShare, passive: PassiveModel, who: str) -> None:
    if share.party != passive.index or share.name != passive.name:
        raise ConfigError(f"{who}: the importance share is for party {share.party} ({share.name})")
    held = {r for r, _ in passive.owner.items()}
    if held != set(share.gain):
        raise ConfigError(f"{who}: the importance share covers records {len(set(share.gain) - held)} this party "
                          f"does not hold and misses {len(held - set(share.gain))} it holds: it was made for "
                          "another model")


def _feature_names(model: "FederatedModel") -> tuple[list[str], dict[int, Any]]:
    """Joined feature names (active's first, then each passive's in index order) and each
    party's owner table and names."""
    parties = {0: (model.active.owner, model.active.feature_names)}
    parties.update({p.index: (p.owner, p.feature_names) for p in sorted(model.passives, key=lambda p: p.index)})
    names = [name for _, names in parties.values() for name in names]
    return names, parties


def joint_scores(model: "FederatedModel", importance_type: str = "weight") -> dict[str, float]:
    """Every party's features scored together, exactly as ``Booster.get_score`` on the
    joined table (features that never split are absent)."""
    check_type(importance_type, model.active.protocol, "joint importance")
    names, parties = _feature_names(model)

    def name(party: int, record: int) -> str:
        owner, feature_names = parties[party]
        return feature_names[owner.get(record).feature]

    scores = score(((name(p, r), g, c) for p, r, g, c in _splits(model.active.ensemble)), importance_type)
    return _ordered(scores, names)


def joint_importances(model: "FederatedModel", importance_type: str = "gain") -> np.ndarray:
    """One score per joined feature (active's first, then each passive's), normalised to sum
    to 1 as XGBoost's scikit-learn ``feature_importances_`` does; its default type is
    ``gain`` (average gain per split). All zeros when no tree splits."""
    names, _ = _feature_names(model)
    scores = joint_scores(model, importance_type)
    values = np.array([scores.get(name, 0.0) for name in names], dtype=np.float64)
    total = values.sum()
    return values / total if total > 0 else values
