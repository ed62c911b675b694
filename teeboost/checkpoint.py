"""Checkpoints: each party's own state after every boosting round, on its own disk.

A run that crashes, is killed or loses a peer is restarted with ``--resume`` and ends with
the model an uninterrupted run grows, tree for tree. The active party keeps its boosting
state (margins, subsampling generator, validation metrics so far, trees, its split records,
its transcript position, its enclave's sealed state); each passive party keeps only its
split records. A checkpoint names the run it belongs to (a digest of data, parameters and
protocol), so a file from another run is refused instead of silently continued. Files are
written under a temporary name, fsynced and renamed: a crash mid-write leaves the previous
checkpoint intact.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .core.boosting import BoostState, TreeProgress
from .core.model import Ensemble
from .core.tree import OwnerTable
from .errors import CheckpointError, ModelFileError
from .model_files import write_atomically

__all__ = ["ActiveCheckpoint", "PassiveCheckpoint", "run_digest", "active_checkpoint_file",
           "passive_checkpoint_file", "platform_key_file", "identity_key_file", "remove_checkpoint", "remove_checkpoints"]

FORMAT = "teeboost-checkpoint"
VERSION = 1


def run_digest(description: dict[str, Any], *arrays: np.ndarray) -> str:
    """SHA-256 over a JSON description and raw arrays: equal only for the same run."""
    digest = hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode())
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def active_checkpoint_file(directory: str | Path) -> Path:
    return Path(directory) / "active.ckpt"


def passive_checkpoint_file(directory: str | Path, index: int) -> Path:
    return Path(directory) / f"passive-{index}.ckpt"


def platform_key_file(directory: str | Path, index: int) -> Path:
    """A run trained in one process keeps each party's simulated platform key here."""
    return Path(directory) / f"platform-{index}.key"


def identity_key_file(directory: str | Path, index: int) -> Path:
    """... and each party's identity key (the run's pinned identities must not change)."""
    return Path(directory) / f"identity-{index}.key"


def remove_checkpoint(path: Path) -> None:
    """Once the final model files are written the checkpoint has done its job; so has its
    directory once nothing else is in it (a finished run leaves no empty folders)."""
    path.unlink(missing_ok=True)
    for partial in path.parent.glob(f".{path.name}.*"):  # a write a kill interrupted (write_atomically)
        partial.unlink(missing_ok=True)
    _remove_if_empty(path.parent)


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass  # absent, the working directory, or holds files that are not ours


def remove_checkpoints(directory: str | Path, n_passive: int) -> None:
    """Every party's checkpoint of a run trained in one process (and the directory if empty)."""
    directory = Path(directory)
    remove_checkpoint(active_checkpoint_file(directory))
    for index in range(1, n_passive + 1):
        remove_checkpoint(passive_checkpoint_file(directory, index))
    for index in range(n_passive + 1):
        remove_checkpoint(platform_key_file(directory, index))
        remove_checkpoint(identity_key_file(directory, index))
    _remove_if_empty(directory)


def _write(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    write_atomically(path, buffer.getvalue())


def _read(path: Path, role: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    if not path.exists():
        raise CheckpointError(f"{path}: no checkpoint to resume from")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        meta = json.loads(arrays.pop("__meta__").tobytes())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise CheckpointError(f"{path}: unreadable or corrupt checkpoint ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a teeboost checkpoint")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {meta.get('version')!r}; this teeboost reads {VERSION}")
    if meta.get("role") != role:
        raise CheckpointError(f"{path}: a {meta.get('role')} party's checkpoint, expected the {role} party's")
    return meta, arrays


def _field(meta: dict[str, Any], key: str, path: Path) -> Any:
    try:
        return meta[key]
    except KeyError:
        raise CheckpointError(f"{path}: checkpoint lacks {key!r}") from None


@dataclass
class ActiveCheckpoint:
    """The active party after a completed round. In strict mode the host holds no boosting
    state (``state`` None): its enclave's sealed blob carries it, and ``trees`` counts it."""

    run_id: str
    state: BoostState | None
    owner: OwnerTable
    progress: list[TreeProgress] = field(default_factory=list)
    transcript_offset: int | None = None
    sealed_enclave: bytes | None = None  # opaque to the host: sealed by its enclave
    trees: int = 0  # trees done, when ``state`` is None

    @property
    def n_trees(self) -> int:
        return self.trees if self.state is None else len(self.state.ensemble.trees)

    def save(self, path: Path) -> None:
        state = self.state
        meta = {
            "format": FORMAT, "version": VERSION, "role": "active", "run_id": self.run_id,
            "n_trees": self.n_trees, "records": self.owner.to_list(),
            "progress": [asdict(p) for p in self.progress], "transcript_offset": self.transcript_offset,
            "sealed_enclave": None if self.sealed_enclave is None else self.sealed_enclave.hex(),
        }
        arrays = {}
        if state is not None:
            meta.update({"next_round": state.next_round, "rng_state": state.rng_state,
                         "best_value": state.best_value, "best_round": state.best_round,
                         "evals": state.evals, "ensemble": state.ensemble.to_dict()})
            arrays["margin"] = state.margin
            if state.valid_margin is not None:
                arrays["valid_margin"] = state.valid_margin
        _write(path, meta, arrays)

    @classmethod
    def load(cls, path: Path, n_features: int) -> "ActiveCheckpoint":
        meta, arrays = _read(path, "active")
        try:
            owner = OwnerTable.from_list(_field(meta, "records", path), n_features)
            state = None
            if "ensemble" in meta:
                ensemble = Ensemble.from_dict(meta["ensemble"])
                state = BoostState(
                    ensemble=ensemble, margin=arrays["margin"], rng_state=_field(meta, "rng_state", path),
                    next_round=int(_field(meta, "next_round", path)), valid_margin=arrays.get("valid_margin"),
                    best_value=meta.get("best_value"), best_round=int(meta.get("best_round", -1)),
                    evals={str(k): [float(v) for v in values] for k, values in meta.get("evals", {}).items()},
                )
            elif meta.get("sealed_enclave") is None:
                raise CheckpointError(f"{path}: checkpoint holds neither boosting state nor an enclave's")
            progress = [TreeProgress(**p) for p in meta.get("progress", [])]
            sealed = meta.get("sealed_enclave")
            return cls(str(_field(meta, "run_id", path)), state, owner, progress,
                       meta.get("transcript_offset"), None if sealed is None else bytes.fromhex(sealed),
                       int(_field(meta, "n_trees", path)))
        except (ModelFileError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: inconsistent checkpoint ({exc})") from None


@dataclass
class PassiveCheckpoint:
    """A passive party after a completed round: its split records and what they belong to."""

    run_id: str
    fingerprint: str  # digest of this party's own data and parameters
    n_trees: int
    owner: OwnerTable
    sealed_enclave: bytes | None = None  # strict mode: the records, sealed by this party's enclave
    # 1-TEE: the value this party chose for the run and sealed to the active enclave, which binds it into the
    # sealing context of its checkpoints: given again only when this party resumes the run
    resume_token: bytes | None = None

    def save(self, path: Path) -> None:
        _write(path, {"format": FORMAT, "version": VERSION, "role": "passive", "run_id": self.run_id,
                      "fingerprint": self.fingerprint, "n_trees": self.n_trees,
                      "records": self.owner.to_list(),
                      "sealed_enclave": None if self.sealed_enclave is None else self.sealed_enclave.hex(),
                      "resume_token": None if self.resume_token is None else self.resume_token.hex()}, {})

    @classmethod
    def load(cls, path: Path, n_features: int) -> "PassiveCheckpoint":
        meta, _ = _read(path, "passive")
        try:
            sealed = meta.get("sealed_enclave")
            token = meta.get("resume_token")
            return cls(str(_field(meta, "run_id", path)), str(_field(meta, "fingerprint", path)),
                       int(_field(meta, "n_trees", path)),
                       OwnerTable.from_list(_field(meta, "records", path), n_features),
                       None if sealed is None else bytes.fromhex(sealed),
                       None if token is None else bytes.fromhex(token))
        except (ModelFileError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: inconsistent checkpoint ({exc})") from None
