"""A passive party: answers the active party's requests about its own columns, nothing else.

It serves three kinds of request: the handshake, its protocol's split-finding messages, and
routing questions for its own split records (training, validation, prediction).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.columns import PartyColumns
from ..core.tree import OwnerTable
from ..errors import ProtocolError
from ..protocols.partition import decode_row_sets
from .messages import Ack, DiscardTrees, Hello, HelloReply, RouteReply, RouteRequest

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
    ) -> None:
        self.index = index
        self.name = name
        self.feature_names = list(feature_names)
        self.owner = owner
        self.columns = columns
        self.protocol = protocol
        self.protocol_name = protocol_name
        self._datasets: dict[str, np.ndarray] = {}
        self._handled = tuple(getattr(protocol, "handles", ()))

    def add_dataset(self, name: str, raw: np.ndarray) -> None:
        """Raw feature values (rows aligned with the active party's) for routing questions."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != len(self.feature_names):
            raise ValueError(f"dataset {name!r} must have {len(self.feature_names)} columns")
        self._datasets[name] = raw

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
        return HelloReply(self.name, self.columns.n_rows, self.columns.bins.n_value_bins.astype(np.int32))

    def _route(self, msg: RouteRequest) -> RouteReply:
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
