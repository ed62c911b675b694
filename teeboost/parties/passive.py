"""A passive party: answers the active party's requests about its own columns, nothing else.

It serves four kinds of request: the handshake, its protocol's split-finding messages,
routing questions for its own split records (training, validation, prediction), and saving or
resuming from its own checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import PassiveCheckpoint
from ..core.columns import PartyColumns
from ..core.tree import OwnerTable
from ..errors import CheckpointError, ProtocolError
from ..protocols.partition import decode_row_sets
from .messages import Ack, DiscardTrees, Hello, HelloReply, ResumeFrom, RouteReply, RouteRequest, SaveCheckpoint

__all__ = ["PassiveParty"]


class PassiveParty:
    """State of one passive party; ``handle`` is its whole interface."""

    def __init__(
        self,
        index: int,
        name: str,
        feature_names: list[str],
        owner: OwnerTable,
        *,
        columns: PartyColumns | None = None,
        protocol: Any = None,
        protocol_name: str | None = None,
        checkpoint: Path | None = None,
        fingerprint: str = "",
    ) -> None:
        self.index = index
        self.name = name
        self.feature_names = list(feature_names)
        self.owner = owner
        self.columns = columns
        self.protocol = protocol
        self.protocol_name = protocol_name
        self.checkpoint = checkpoint
        self.fingerprint = fingerprint
        self._datasets: dict[str, np.ndarray] = {}
        self._handled = tuple(getattr(protocol, "handles", ()))

    def add_dataset(self, name: str, raw: np.ndarray) -> None:
        """Raw feature values (rows aligned with the active party's) for routing questions."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != len(self.feature_names):
            raise ValueError(f"dataset {name!r} must have {len(self.feature_names)} columns")
        self._datasets[name] = raw
        hook = getattr(self.protocol, "add_dataset", None)  # strict mode routes validation rows in enclaves
        if hook is not None:
            hook(name, raw)

    def close(self) -> None:
        """Release the protocol's processes and keys."""
        close = getattr(self.protocol, "close", None)
        if close is not None:
            close()

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, Hello):
            return self._hello(msg)
        if isinstance(msg, RouteRequest):
            return self._route(msg)
        if isinstance(msg, DiscardTrees):
            if msg.keep < 0:
                raise ProtocolError(f"cannot keep {msg.keep} trees")
            self.owner.keep_trees_below(msg.keep)
            return Ack()
        if isinstance(msg, SaveCheckpoint):
            return self._save_checkpoint(msg)
        if isinstance(msg, ResumeFrom):
            return self._resume(msg)
        if self._handled and isinstance(msg, self._handled):
            return self.protocol.handle(msg)
        raise ProtocolError(f"party {self.name!r} does not serve {type(msg).__name__} messages")

    def _hello(self, msg: Hello) -> HelloReply:
        if self.columns is None:
            raise ProtocolError(f"party {self.name!r} holds no training data")
        if msg.protocol != self.protocol_name:
            raise ProtocolError(f"party {self.name!r} runs protocol {self.protocol_name!r}, not {msg.protocol!r}")
        if msg.party_index != self.index:
            raise ProtocolError(f"party {self.name!r} is party {self.index}, not {msg.party_index}")
        if msg.n_rows != self.columns.n_rows:
            raise ProtocolError(
                f"party {self.name!r} holds {self.columns.n_rows} training rows, the active party {msg.n_rows}"
            )
        if msg.max_bin != self.columns.bins.max_bin:
            raise ProtocolError(f"party {self.name!r} binned with max_bin={self.columns.bins.max_bin}, not {msg.max_bin}")
        bins = self.columns.bins.n_value_bins.astype(np.int32)
        if self.protocol_name == "strict":  # bin counts go only into this party's own enclave
            bins = np.zeros_like(bins)
        return HelloReply(self.name, self.columns.n_rows, bins)

    def _checkpoint_path(self) -> Path:
        if self.checkpoint is None or self.columns is None:
            raise ProtocolError(f"party {self.name!r} keeps no checkpoints for this run")
        return self.checkpoint

    def _save_checkpoint(self, msg: SaveCheckpoint) -> Ack:
        path = self._checkpoint_path()
        if msg.n_trees < 0 or any(r.tree >= msg.n_trees for _, r in self.owner.items()):
            raise ProtocolError(f"party {self.name!r} holds split records beyond tree {msg.n_trees - 1}")
        sealed = getattr(self.protocol, "sealed_state", None)
        PassiveCheckpoint(msg.run_id, self.fingerprint, msg.n_trees, self.owner,
                          sealed() if sealed is not None else None).save(path)
        return Ack()

    def _resume(self, msg: ResumeFrom) -> Ack:
        path = self._checkpoint_path()
        saved = PassiveCheckpoint.load(path, len(self.feature_names))
        if saved.run_id != msg.run_id:
            raise CheckpointError(f"party {self.name!r}: {path} belongs to another run")
        if saved.fingerprint != self.fingerprint:
            raise CheckpointError(f"party {self.name!r}: its data or parameters changed since {path} was written")
        if saved.n_trees < msg.n_trees:
            raise CheckpointError(f"party {self.name!r}: {path} covers {saved.n_trees} trees, "
                                  f"the active party resumes after {msg.n_trees}")
        restore = getattr(self.protocol, "restore_sealed_state", None)
        if restore is not None:
            if saved.sealed_enclave is None:
                raise CheckpointError(f"party {self.name!r}: {path} holds no sealed enclave state to resume from")
            restore(saved.sealed_enclave, msg.n_trees)
        saved.owner.rewind(msg.n_trees)
        self.owner = saved.owner
        if self.columns is not None:
            self.columns.owner = saved.owner
        return Ack()

    def _route(self, msg: RouteRequest) -> RouteReply:
        if self.protocol_name == "strict":  # an answer in the clear is a partition of the rows asked about
            raise ProtocolError(f"party {self.name!r} trained in strict mode: it routes rows only between enclaves")
        raw = self._datasets.get(msg.dataset)
        if raw is None:
            raise ProtocolError(f"party {self.name!r} has no dataset {msg.dataset!r}")
        if msg.n_rows != raw.shape[0] or msg.encodings.size != msg.records.size:
            raise ProtocolError(f"routing question about {msg.n_rows} rows of {msg.dataset!r}; "
                                f"party {self.name!r} holds {raw.shape[0]}")
        groups = decode_row_sets(msg.encodings, msg.offsets, msg.payload, raw.shape[0], "routing question")
        answers = [self.owner.go_left(raw, int(r), rows) for r, rows in zip(msg.records, groups)]
        flat = np.concatenate(answers) if answers else np.empty(0, dtype=bool)
        return RouteReply(int(flat.size), np.packbits(flat))
