"""A passive party: answers the active party's requests about its own columns, nothing else.

It serves four kinds of request: the handshake, its protocol's split-finding messages,
routing questions for its own split records (training, validation, prediction), and saving or
resuming from its own checkpoint. Its ``Policy`` bounds what these reveal: the protocol, how
many split records a run may create per tree, how small a partition may be, and how many of
its records one row may be routed through per tree (no more than a path of ``max_depth``
crosses), so routing is not an oracle on arbitrary thresholds. ``queries`` counts what was
served, for the audit log.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import PassiveCheckpoint
from ..compute import ComputeBackend
from ..core.columns import PartyColumns
from ..core.constraints import RunConstraints
from ..core.routing import Router
from ..core.tree import OwnerTable
from ..errors import CheckpointError, ProtocolError
from ..policy import Policy, PolicyRefused
from teeboost.protocols.enclave.partition import SplitReply, decode_row_sets
from teeboost.protocols.messages import Ack, DiscardTrees, ModelDone, Hello, HelloReply, ResumeFrom, RouteReply, RouteRequest, SaveCheckpoint

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
        policy: Policy | None = None,
        max_depth: int | None = None,
        vocabularies: dict | None = None,
        served_runs: set[str] | None = None,
        backend: ComputeBackend | None = None,
        constraints: RunConstraints | None = None,
    ) -> None:
        self.index = index
        self.constraints = constraints or RunConstraints()  # the run's, by column name
        self.vocabularies = dict(vocabularies or {})  # its categorical features' codes
        self.name = name
        self.feature_names = list(feature_names)
        self.owner = owner
        self.columns = columns
        self.protocol = protocol
        self.protocol_name = protocol_name
        self.checkpoint = checkpoint
        self.fingerprint = fingerprint
        self.policy = policy or Policy.unrestricted()  # in one process: one operator, no limits
        # a row's path crosses at most max_depth splits of one tree: the run's, else the policy's
        self.max_depth = max_depth if max_depth is not None else self.policy.max_depth
        self.queries: Counter[str] = Counter()
        self.model_digest = ""  # of the trees its records belong to, told at the end of training
        self._revealed: Counter[int] = Counter()  # tree -> partitions this party returned
        self._records_checked = 0
        self._datasets: dict[str, np.ndarray] = {}
        self._row_keys: dict[str, np.ndarray] = {}  # dataset -> keyed hashes of its rows' ids (deployed)
        self.ledger = None  # RowLedger: bits per row per day, counted where routing answers leave
        # the party's own compute backend ([compute]); routing answers run there if it takes them
        self.backend = backend
        self._router = Router(backend)  # keeps each routed dataset's shards on that backend
        self._visits: dict[str, dict[int, np.ndarray]] = {}  # dataset -> tree -> records asked per row
        self._handled = tuple(getattr(protocol, "handles", ()))
        self.run_id: str | None = None  # of this training, from the active party's Hello
        # training run ids this party served (shared by a deployed party's runs): one may be
        # used again only to resume it from this party's own checkpoint
        self.served_runs: set[str] = served_runs if served_runs is not None else set()
        if hasattr(protocol, "bind_policy"):  # partitions and enclave criteria are checked where they arise
            protocol.bind_policy(self.name, self.policy, self.max_depth)

    def add_dataset(self, name: str, raw: np.ndarray, row_keys: np.ndarray | None = None) -> None:
        """Raw feature values (rows aligned with the active party's) for routing questions;
        ``row_keys``: the row ledger's names for those rows, where bits per row are counted."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != len(self.feature_names):
            raise ValueError(f"dataset {name!r} must have {len(self.feature_names)} columns")
        if row_keys is not None and row_keys.shape[0] != raw.shape[0]:
            raise ValueError(f"dataset {name!r}: one row key per row")
        self._datasets[name] = raw
        self._row_keys.pop(name, None)
        if row_keys is not None:
            self._row_keys[name] = row_keys
        self._visits.pop(name, None)
        hook = getattr(self.protocol, "add_dataset", None)  # strict mode routes validation rows in enclaves
        if hook is not None:
            hook(name, raw, row_keys)

    def keep_datasets(self, keep: list[str]) -> None:
        """Keep only the prediction datasets named (the run's own are never dropped): a
        session whose dataset went is refused by name, never mixed with another."""
        batches = [name for name in self._datasets if name not in ("train", "valid", "test") and name not in keep]
        drop = getattr(self.protocol, "drop_dataset", None)
        for name in batches:
            self._datasets.pop(name, None)
            self._row_keys.pop(name, None)
            self._visits.pop(name, None)
            self._router.forget(name)
            if drop is not None:
                drop(name)

    def set_row_keys(self, name: str, row_keys: np.ndarray) -> None:
        """The row ledger's names for a dataset added without them (a run's validation rows)."""
        if name not in self._datasets or row_keys.shape[0] != self._datasets[name].shape[0]:
            raise ValueError(f"dataset {name!r}: one row key per row")
        self._row_keys[name] = row_keys

    def bind_ledger(self, ledger, strict_ledger=None, on_session=None) -> None:
        """Count bits per row: routing answers in ``ledger`` (a ``RowLedger``), strict
        sessions in the enclave's sealed ledger kept in ``strict/enclave/ledger``."""
        self.ledger = ledger
        bind = getattr(self.protocol, "bind_ledger", None)
        if bind is not None and strict_ledger is not None:
            bind(strict_ledger, on_session)

    def end_training(self) -> None:
        """Training is over: the run's own rows (training, validation, held-out) are no longer
        routed; only prediction batches, aligned and budgeted, are."""
        drop = getattr(self.protocol, "drop_dataset", None)
        for name in ("train", "valid", "test"):
            self._datasets.pop(name, None)
            self._row_keys.pop(name, None)
            self._router.forget(name)
            self._visits.pop(name, None)
            if drop is not None:
                drop(name)

    def close(self) -> None:
        """Release the protocol's processes and keys."""
        self._router.close()
        close = getattr(self.protocol, "close", None)
        if close is not None:
            close()

    def handle(self, msg: Any) -> Any:
        self.queries[type(msg).__name__] += 1
        if isinstance(msg, Hello):
            return self._hello(msg)
        if isinstance(msg, RouteRequest):
            return self._route(msg)
        if isinstance(msg, DiscardTrees):
            if msg.keep < 0:
                raise ProtocolError(f"cannot keep {msg.keep} trees")
            self.owner.keep_trees_below(msg.keep)
            return Ack()
        if isinstance(msg, ModelDone):
            if len(msg.model_digest) != 32:
                raise ProtocolError("a model digest is 32 bytes")
            self.model_digest = msg.model_digest.hex()
            return Ack()
        if isinstance(msg, SaveCheckpoint):
            return self._save_checkpoint(msg)
        if isinstance(msg, ResumeFrom):
            return self._resume(msg)
        if self._handled and isinstance(msg, self._handled):
            reply = self.protocol.handle(msg)
            self._check_records(reply)  # before the reply (and the partition in it) leaves
            return reply
        raise ProtocolError(f"party {self.name!r} does not serve {type(msg).__name__} messages")

    def _check_records(self, reply: Any) -> None:
        """Partitions revealed so far, per tree, over this party's whole life: discarding
        trees or resuming from a checkpoint drops records but never what was revealed."""
        if isinstance(reply, SplitReply):
            tree = int(reply.tree)
            latest = max(self._revealed, default=0)
            if tree < latest or tree < 0:  # trees are grown once each, in order, from tree 0
                raise PolicyRefused(self.name, "max_trees", f"a split in tree {tree} after splits in tree {latest}: "
                                    "trees are numbered from 0 and grown once each, in order")
            self._revealed[tree] += int(reply.records.size)
            self.policy.check_records(self.name, dict(self._revealed))
        if len(self.owner) != self._records_checked:  # records arrive with partitions or, in strict mode, at the end
            self._records_checked = len(self.owner)
            self.policy.check_records(self.name, self.owner.records_per_tree())

    def _hello(self, msg: Hello) -> HelloReply:
        if self.columns is None:
            raise ProtocolError(f"party {self.name!r} holds no training data")
        self.policy.check_protocol(self.name, msg.protocol)
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
        categorical = self.columns.bins.categorical_mask
        if self.protocol_name == "strict":  # bin counts go only into this party's own enclave
            bins, categorical = np.zeros_like(bins), np.zeros_like(categorical)
        self.run_id = msg.run_id
        bind = getattr(self.protocol, "bind_run", None)  # 1-TEE: the enclave's run must be this one
        if bind is not None:
            bind(msg.run_id, served=msg.run_id in self.served_runs)
        self.served_runs.add(msg.run_id)
        mine = self.constraints.for_party(self.feature_names)
        held = sorted(self.constraints.names() & set(self.feature_names))
        return HelloReply(self.name, self.columns.n_rows, bins, categorical, mine.directions, mine.membership,
                          json.dumps(held))

    def _checkpoint_path(self) -> Path:
        if self.checkpoint is None or self.columns is None:
            raise ProtocolError(f"party {self.name!r} keeps no checkpoints for this run")
        return self.checkpoint

    def _save_checkpoint(self, msg: SaveCheckpoint) -> Ack:
        path = self._checkpoint_path()
        if msg.run_id != self.run_id:
            raise ProtocolError(f"party {self.name!r} trains run {self.run_id!r}, not {msg.run_id!r}")
        if msg.n_trees < 0 or any(r.tree >= msg.n_trees for _, r in self.owner.items()):
            raise ProtocolError(f"party {self.name!r} holds split records beyond tree {msg.n_trees - 1}")
        sealed = getattr(self.protocol, "sealed_state", None)
        token = getattr(self.protocol, "resume_token", None)
        PassiveCheckpoint(msg.run_id, self.fingerprint, msg.n_trees, self.owner,
                          sealed() if sealed is not None else None,
                          token() if token is not None else None).save(path)
        return Ack()

    def _resume(self, msg: ResumeFrom) -> Ack:
        path = self._checkpoint_path()
        if self.run_id is None or msg.run_id != self.run_id:
            raise ProtocolError(f"party {self.name!r} was told run {self.run_id!r} in the handshake; it resumes "
                                "only that run")
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
        resume_with = getattr(self.protocol, "resume_with", None)
        if resume_with is not None:
            if saved.resume_token is None:
                raise CheckpointError(f"party {self.name!r}: {path} holds no sealing value to resume this run with")
            resume_with(msg.run_id, saved.resume_token)
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
        for record, rows in zip(msg.records, groups):
            self._count_visits(msg.dataset, int(record), rows)
        self._charge(msg.dataset, groups)
        answers = self._router.answers(self.owner, msg.dataset, raw, list(zip(msg.records.tolist(), groups)))
        self.queries["routed rows"] += int(sum(rows.size for rows in groups))
        flat = np.concatenate(answers) if answers else np.empty(0, dtype=bool)
        return RouteReply(int(flat.size), np.packbits(flat))

    def _charge(self, dataset: str, groups: list[np.ndarray]) -> None:
        """Every routing answer is one bit about one row: charged to the row ledger before any
        leaves, the whole request refused if a row would pass the daily budget."""
        keys = self._row_keys.get(dataset)
        if self.ledger is None or (dataset == "train" and keys is None and self.columns is not None):
            return  # the run's own training rows, while it trains: bounded by k and the depth, not here
        if keys is None:
            raise ProtocolError(f"party {self.name!r} counts bits per row and has no row keys for {dataset!r}")
        n = self._datasets[dataset].shape[0]
        answers = np.bincount(np.concatenate(groups), minlength=n) if groups else np.zeros(n, np.int64)
        self.ledger.charge(keys, answers, self.policy.max_bits_per_row_per_day,
                           f"answering {int(answers.sum())} routing question(s) on dataset {dataset!r}")

    def _count_visits(self, dataset: str, record_id: int, rows: np.ndarray) -> None:
        """Refuse to route a row through more of this party's records in one tree than a
        path of ``max_depth`` splits crosses (only records this party created are known)."""
        tree = self.owner.get(record_id).tree  # unknown record ids are refused here
        if self.max_depth is None:
            return
        per_tree = self._visits.setdefault(dataset, {})
        counts = per_tree.get(tree)
        if counts is None:
            counts = per_tree[tree] = np.zeros(self._datasets[dataset].shape[0], dtype=np.uint8)
        np.add.at(counts, rows, 1)
        if rows.size and int(counts[rows].max()) > self.max_depth:
            raise PolicyRefused(self.name, "max_depth", f"a row of dataset {dataset!r} was asked about more "
                                f"splits of tree {tree} than a path of depth {self.max_depth} crosses; routing "
                                "answers only follow a row's path")
