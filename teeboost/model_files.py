"""Saved models: one versioned JSON file per party, never pickle.

The active party's file holds the tree structure (owner party and record id at each split,
leaf values) and its own split records; each passive party's file holds only its own split
records, or for a strict model those records sealed by its enclave (``sealed_records``,
base64), with no record in the clear until the label owner consents to disclose them. Files are written to a temporary name and renamed, so a crash never leaves a
half-written model behind.
"""

from __future__ import annotations

import base64
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .categories import Vocabulary
from .core.model import Ensemble
from .core.tree import OwnerTable
from .errors import ModelFileError

__all__ = ["ActiveModel", "PassiveModel", "save_models", "remove_stale_models", "load_model_dir", "load_active", "load_passive",
           "FORMAT", "VERSION", "ACTIVE_FILE"]

FORMAT = "teeboost-model"
VERSION = 1
ACTIVE_FILE = "active.json"
_PARTY_FILE = re.compile(r"active\.json|passive-[0-9]+\.json")  # the names save_models gives party files


@dataclass
class ActiveModel:
    ensemble: Ensemble
    owner: OwnerTable
    feature_names: list[str]
    passive_parties: dict[int, str]  # index -> name
    protocol: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    id_column: str | None = None
    vocabularies: dict[str, Vocabulary] = field(default_factory=dict)  # its categorical features
    report: dict[str, Any] | None = None  # the training run's report (seconds, bytes, per-tree progress)
    estimator: dict[str, Any] | None = None  # the Python estimator's settings, for ``load``


@dataclass
class PassiveModel:
    index: int
    name: str
    feature_names: list[str]
    owner: OwnerTable
    protocol: str = ""  # "strict": this party routes only enclave to enclave
    model_digest: str = ""  # strict: hex SHA-256 of the published model its records belong to
    max_depth: int | None = None  # of the run: routing follows at most this many splits per tree and row
    vocabularies: dict[str, Vocabulary] = field(default_factory=dict)  # its categorical features
    sealed_records: bytes = b""  # strict: its records as its enclave sealed them (``owner`` empty until disclosed)
    disclosure: dict[str, Any] | None = None  # strict, once disclosed: the label owner's consent that allowed it

    @property
    def records_sealed(self) -> bool:
        """Its split records exist only sealed (a strict model not disclosed)."""
        return bool(self.sealed_records) and len(self.owner) == 0

    def require_records(self, what: str) -> None:
        """Refuse ``what`` (export, importances) while the records are sealed, saying how to
        open them."""
        if self.records_sealed:
            raise ModelFileError(
                f"{what}: party {self.name!r}'s split records of strict model {self.model_digest[:16]} are sealed in "
                "its enclave (they reveal which way the labels lean); the label owner runs `teeboost consent --config "
                f"ACTIVE.toml --party {self.name} --out consent.json`, then this party runs `teeboost disclose "
                "--config PASSIVE.toml --consent consent.json` (docs/enclaves.md)")


def passive_file(index: int) -> str:
    return f"passive-{index}.json"


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same directory, fsync, rename: readers (and a
    resumed run) see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(payload, indent=1).encode("utf-8"))


def active_payload(model: ActiveModel) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "role": "active",
        "protocol": model.protocol,
        "params": model.params,
        "label": model.label,
        "id_column": model.id_column,
        "features": model.feature_names,
        "records": model.owner.to_list(),
        **_categories_payload(model.vocabularies),
        "passive_parties": [
            {"index": i, "name": n, "file": passive_file(i)} for i, n in sorted(model.passive_parties.items())
        ],
        "ensemble": model.ensemble.to_dict(),
        **({"report": model.report} if model.report is not None else {}),
        **({"estimator": model.estimator} if model.estimator is not None else {}),
    }


def passive_payload(model: PassiveModel) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "role": "passive",
        "index": model.index,
        "name": model.name,
        "features": model.feature_names,
        "records": model.owner.to_list(),
        **_categories_payload(model.vocabularies),
        **({"protocol": model.protocol} if model.protocol else {}),
        **({"model_digest": model.model_digest} if model.model_digest else {}),
        **({"max_depth": model.max_depth} if model.max_depth is not None else {}),
        **({"sealed_records": base64.b64encode(model.sealed_records).decode()} if model.sealed_records else {}),
        **({"disclosure": model.disclosure} if model.disclosure else {}),
    }


def _categories_payload(vocabularies: dict[str, Vocabulary]) -> dict[str, Any]:
    """Categorical features: their categories in code order (a split record's ``categories``
    mask has bit c set when code c goes left)."""
    return {"categories": {name: v.to_dict() for name, v in vocabularies.items()}} if vocabularies else {}


def _vocabularies(data: dict[str, Any], features: list[str]) -> dict[str, Vocabulary]:
    found = data.get("categories") or {}
    if not isinstance(found, dict) or any(name not in features for name in found):
        raise ValueError("categories must map feature names of this party to their categories")
    return {str(name): Vocabulary.from_dict(entry, name) for name, entry in found.items()}


def save_models(model_dir: str | Path, active: ActiveModel | None, passives: list[PassiveModel]) -> list[Path]:
    """Write whichever parties' files this process holds; returns the paths written."""
    model_dir = Path(model_dir)
    written = []
    for model in passives:
        path = model_dir / passive_file(model.index)
        _write_json(path, passive_payload(model))
        written.append(path)
    if active is not None:
        path = model_dir / ACTIVE_FILE
        _write_json(path, active_payload(active))
        written.append(path)
    return written


def remove_stale_models(model_dir: str | Path, written: list[Path]) -> list[Path]:
    """After a whole model was written: delete the party files an earlier model left in the
    same directory (say, ``passive-3.json`` of a run with one more party), so the directory
    holds exactly this model. Only files named and formatted as teeboost model files go;
    anything else there is the user's. Returns the paths removed."""
    keep = {Path(p).resolve() for p in written}
    removed = []
    for path in sorted(Path(model_dir).glob("*.json")):
        if path.resolve() in keep or not _PARTY_FILE.fullmatch(path.name) or not path.is_file():
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                ours = json.load(handle).get("format") == FORMAT
        except (OSError, ValueError, AttributeError):
            ours = False
        if ours:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _read(path: Path, role: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: model file not found") from None
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path}: not a readable model file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ModelFileError(f"{path}: not a teeboost model file")
    if data.get("version") != VERSION:
        raise ModelFileError(f"{path}: model format version {data.get('version')!r}; this teeboost reads {VERSION}")
    if data.get("role") != role:
        raise ModelFileError(f"{path}: holds the {data.get('role')!r} party's model, expected {role!r}")
    return data


def load_active(path: str | Path) -> ActiveModel:
    path = Path(path)
    data = _read(path, "active")
    try:
        features = [str(f) for f in data["features"]]
        model = ActiveModel(
            ensemble=Ensemble.from_dict(data["ensemble"]),
            owner=OwnerTable.from_list(data["records"], len(features)),
            feature_names=features,
            passive_parties={int(p["index"]): str(p["name"]) for p in data["passive_parties"]},
            protocol=str(data["protocol"]),
            params=dict(data.get("params") or {}),
            label=data.get("label"),
            id_column=data.get("id_column"),
            vocabularies=_vocabularies(data, features),
            report=_optional_dict(data, "report"),
            estimator=_optional_dict(data, "estimator"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: malformed active model ({exc})") from None
    except ModelFileError as exc:
        raise ModelFileError(f"{path}: {exc}") from None
    for index, tree in enumerate(model.ensemble.trees):
        for node in range(tree.n_nodes):
            party = tree.party[node]
            if tree.is_leaf(node):
                continue
            if party != 0 and party not in model.passive_parties:
                raise ModelFileError(f"{path}: tree {index} node {node} names unknown party {party}")
            if party == 0 and tree.record[node] not in model.owner:
                raise ModelFileError(f"{path}: tree {index} node {node} names unknown record {tree.record[node]}")
    return model


def load_passive(path: str | Path) -> PassiveModel:
    path = Path(path)
    data = _read(path, "passive")
    try:
        features = [str(f) for f in data["features"]]
        return PassiveModel(int(data["index"]), str(data["name"]), features,
                            OwnerTable.from_list(data["records"], len(features)), str(data.get("protocol", "")),
                            str(data.get("model_digest", "")), _max_depth(data.get("max_depth")),
                            _vocabularies(data, features),
                            base64.b64decode(data.get("sealed_records", ""), validate=True),
                            _optional_dict(data, "disclosure"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: malformed passive model ({exc})") from None
    except ModelFileError as exc:
        raise ModelFileError(f"{path}: {exc}") from None


def _optional_dict(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{key} must be an object")
    return value


def _max_depth(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 30:
        raise ValueError(f"max_depth {value!r} must be a whole number from 1 to 30")
    return value


def load_model_dir(model_dir: str | Path) -> tuple[ActiveModel, list[PassiveModel]]:
    """A directory written by a local run: the active file and every passive party's file."""
    model_dir = Path(model_dir)
    active = load_active(model_dir / ACTIVE_FILE)
    passives = []
    for index, name in sorted(active.passive_parties.items()):
        passive = load_passive(model_dir / passive_file(index))
        if passive.index != index:
            raise ModelFileError(f"{model_dir / passive_file(index)}: holds party {passive.index}, expected {index}")
        passives.append(passive)
    return active, passives
