"""SecureBoost (Cheng et al. 2021): Paillier-encrypted gradients, passive bin sums decrypted
by the active party.

Per tree the active party encrypts each sampled row's fixed-point (g, h) under its own key
(passive parties hold only the public key). Per level each passive party multiplies
ciphertexts per node x feature x bin (the sibling of a smaller child by homomorphic
subtraction), packs many bin sums into each ciphertext, and sends them back with the
plaintext row count per bin. The active party decrypts every bin sum, scores every split and
asks the winner to partition the node. Its transcript therefore holds exactly what
SecureBoost reveals to it: every decrypted bin sum, node instance sets and chosen splits.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import gmpy2
import numpy as np
from gmpy2 import mpz

from teeboost.config import ProtocolOptions
from teeboost.core.histogram import CHANNELS, plan_level
from teeboost.crypto.packing import SlotLayout
from teeboost.crypto.schemes import generate_keypair, public_from_numbers
from teeboost.compute import ComputeBackend, RowShards
from teeboost.crypto.pool import CryptoPool
from teeboost.crypto.reserve import RandomizerReserve
from teeboost.errors import ProtocolError
from teeboost.protocols.messages import Ack
from teeboost.transport.serde import array_field, message
from teeboost.protocols.enclave.partition import check_rows
from teeboost.protocols.scoring.level_loop import ActiveScoring, PassiveScoring

__all__ = ["SecureBoostActive", "SecureBoostPassive", "PublicKeyMessage", "EncryptedGradients",
           "EncryptedHistograms"]


@message
@dataclass(frozen=True)
class PublicKeyMessage:
    """The active party's public key: scheme name and its numbers (JSON, hexadecimal)."""

    scheme: str
    numbers: str


@message
@dataclass(frozen=True)
class EncryptedGradients:
    """One tree's encrypted (g, h) for the sampled rows and the slot layout to sum them in."""

    tree: int
    offset: int
    slot_bits: int
    pack_gradients: bool
    ciphertexts_per_plaintext: int
    rows: np.ndarray = array_field("uint32", 1)
    ciphertexts: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class EncryptedHistograms:
    """Packed encrypted bin sums of the requested nodes, and plaintext row counts per bin."""

    tree: int
    counts: np.ndarray = array_field("int64", 3)
    ciphertexts: np.ndarray = array_field("uint8", 2)


class PhaseTimer(dict):
    """Seconds spent per named phase (the benchmark's breakdown)."""

    def add(self, phase: str, started: float) -> None:
        self[phase] = self.get(phase, 0.0) + time.perf_counter() - started


def meaningful_bins(n_value_bins: np.ndarray, width: int) -> list[tuple[int, int]]:
    """(feature, bin) of every bin that can hold rows: value bins and the missing bin."""
    return [(f, b) for f, k in enumerate(n_value_bins.tolist()) for b in [*range(k), width - 1]]


#: Largest key a passive party accepts unless its own key_bits is larger (a peer's huge key would
#: make every bin sum, which costs the key size squared, a denial of service).
_LARGEST_PEER_KEY_BITS = 4096

_SCHEME_NAMES = {"paillier": "Paillier", "ou": "Okamoto-Uchiyama"}


class SecureBoostActive(ActiveScoring):
    def __init__(self, channel, columns, criteria, passive_bins, passive_categorical, max_bin, options: ProtocolOptions,
                 on_phase: Callable[[str], None] | None = None, *, subsample: float = 1.0,
                 backend: ComputeBackend | None = None) -> None:
        super().__init__(channel, columns, criteria, passive_bins, passive_categorical, max_bin)
        self.options = options
        self.timer = PhaseTimer()
        self._phase = on_phase or (lambda text: None)
        started = time.perf_counter()
        self._phase(f"generating {_SCHEME_NAMES.get(options.scheme, options.scheme)} keys ({options.key_bits} bits)")
        self.key = generate_keypair(options.scheme, options.key_bits, insecure_key_bits=options.insecure_key_bits,
                                    short_randomizer=options.short_randomizer)
        self._phase("starting crypto workers")
        workers = options.crypto_workers
        self.pool = CryptoPool(self.key, workers=workers, pool_id=f"active-{uuid.uuid4().hex}", backend=backend)
        self.reserve: RandomizerReserve | None = None
        if options.precompute_randomizers:
            # with worker processes, filling gets its own at the lowest priority: idle cores only
            background = CryptoPool(self.key, workers=workers, pool_id=f"reserve-{uuid.uuid4().hex}",
                                    niceness=19, backend=backend) if self.pool.workers > 1 else None
            self.reserve = RandomizerReserve(self.pool, limit_bytes=options.randomizer_reserve_mb << 20,
                                             exponent_bits=self.key.exponent_bits, background=background)
        self.timer.add("key setup", started)
        if self.reserve is not None:
            # the first tree's expected need: one randomiser per sampled row and slot
            self.reserve.fill(int(columns.n_rows * min(subsample, 1.0)) * (1 if options.pack_gradients else 2))
        public = self.key.public
        numbers = json.dumps({name: hex(value) for name, value in public.numbers().items()})
        msg = PublicKeyMessage(public.scheme, numbers)
        self.channel.request_all({p: msg for p in self.channel.parties})
        self.layout: SlotLayout | None = None
        self._total_trees: int | None = None

    def expect_trees(self, total: int) -> None:
        self._total_trees = total

    def _send_gradients(self, tree_index, rows, gradients):
        g, h = gradients.g[rows], gradients.h[rows]
        self.layout = SlotLayout.for_tree(g, h, rows.size, self.key.public.plaintext_bits,
                                          pack_gradients=self.options.pack_gradients,
                                          pack_bins=self.options.pack_bins)
        started = time.perf_counter()
        self._phase(f"encrypting gradients for tree {tree_index + 1}")
        plaintexts = self.layout.sample_plaintexts(g, h)
        if self.reserve is None:
            ciphertexts = self.pool.encrypt(plaintexts)
        else:
            randomizers = self.reserve.take(len(plaintexts))
            with self.reserve.paused():
                ciphertexts = self.pool.encrypt(plaintexts, randomizers)
            del randomizers
            if self._total_trees is None or tree_index + 1 < self._total_trees:
                self.reserve.fill(len(plaintexts))  # the next tree's, while the passive parties sum
        self.timer.add("encrypt", started)
        layout = self.layout
        msg = EncryptedGradients(tree_index, layout.offset, layout.slot_bits, layout.pack_gradients,
                                 layout.ciphertexts_per_plaintext, rows.astype(np.uint32), ciphertexts)
        self.channel.request_all({p: msg for p in self.channel.parties})

    def find_splits(self, nodes, node_rows, limits=None):
        self._phase(f"summing encrypted bins for tree {self._tree + 1}")
        return super().find_splits(nodes, node_rows, limits)

    def _histograms(self, party, reply, nodes):
        if not isinstance(reply, EncryptedHistograms):
            raise ProtocolError(f"party {party} answered a histogram request with {type(reply).__name__}")
        layout = self.layout
        n_bins = self.passive_bins[party]
        cells = meaningful_bins(n_bins, self.width)
        shape = (len(nodes), n_bins.size, self.width)
        if reply.counts.shape != shape or np.any(reply.counts < 0):
            raise ProtocolError(f"party {party} sent bin counts of shape {reply.counts.shape}, expected {shape}")
        n_cts = len(nodes) * len(cells) * (1 if layout.pack_gradients else 2)
        expected = (n_cts + layout.ciphertexts_per_plaintext - 1) // layout.ciphertexts_per_plaintext
        if reply.ciphertexts.shape != (expected, self.key.public.ciphertext_bytes):
            raise ProtocolError(f"party {party} sent {reply.ciphertexts.shape[0]} histogram ciphertexts "
                                f"of {reply.ciphertexts.shape[1]} bytes, expected {expected}")
        started = time.perf_counter()
        self._phase(f"decrypting bin sums for tree {self._tree + 1}")
        if self.reserve is None:
            plaintexts = self.pool.decrypt(reply.ciphertexts)  # refuses ciphertexts outside Z_{n^2}
        else:
            with self.reserve.paused():
                plaintexts = self.pool.decrypt(reply.ciphertexts)
        self.timer.add("decrypt", started)
        values = layout.unpack(plaintexts, n_cts)
        feature_index = np.array([f for f, _ in cells])
        bin_index = np.array([b for _, b in cells])
        hist = np.zeros((len(nodes), n_bins.size, self.width, CHANNELS), dtype=np.int64)
        per_node = 2 * len(cells)
        for i in range(len(nodes)):
            counts = reply.counts[i, feature_index, bin_index]
            padding = reply.counts[i].sum() - counts.sum()
            if padding:
                raise ProtocolError(f"party {party} reported rows in bins that do not exist")
            sums = layout.decode_sums(values[i * per_node:(i + 1) * per_node], counts)
            hist[i, feature_index, bin_index, 0] = sums[:, 0]
            hist[i, feature_index, bin_index, 1] = sums[:, 1]
            hist[i, feature_index, bin_index, 2] = counts
        return hist

    def close(self) -> None:
        if self.reserve is not None:
            self.reserve.close()
            # reported apart: "ahead" ran in the background, overlapping other phases; "on
            # demand" is the part of "encrypt" the reserve could not cover
            self.timer["randomizers ahead"] = self.reserve.ahead_seconds
            self.timer["randomizers on demand"] = self.reserve.on_demand_seconds
        self.pool.close()


class SecureBoostPassive(PassiveScoring):
    handles = PassiveScoring.handles + (PublicKeyMessage, EncryptedGradients)
    answers_next_level = True

    def __init__(self, columns, options: ProtocolOptions, backend: ComputeBackend | None = None) -> None:
        super().__init__(columns)
        self.options = options
        self.backend = backend
        self.timer = PhaseTimer()
        self.public = None  # the active party's public key
        self.pool: CryptoPool | None = None
        self.layout: SlotLayout | None = None
        self._ciphertexts: RowShards | None = None  # (n_rows, slots, bytes) for this tree, in row shards
        self._bins: RowShards | None = None  # their binned columns, (features, sampled rows), in the same shards
        self._sampled: np.ndarray | None = None  # this tree's sampled rows, sorted
        self._slots = 1
        self._cache: dict[int, list[mpz]] = {}
        self.width = columns.bins.max_bin + 1

    def _begin_tree(self, msg):
        if isinstance(msg, PublicKeyMessage):
            return self._set_key(msg)
        if not isinstance(msg, EncryptedGradients):
            raise ProtocolError(f"secureboost does not serve {type(msg).__name__}")
        if self.public is None:
            raise ProtocolError("encrypted gradients arrived before the public key")
        n_rows = self.columns.n_rows
        rows = check_rows(msg.rows, n_rows, "gradient rows")
        slots = 1 if msg.pack_gradients else 2  # ciphertexts per row
        size = self.public.ciphertext_bytes
        if msg.ciphertexts.shape != (rows.size * slots, size):
            raise ProtocolError(f"expected {rows.size * slots} ciphertexts of {size} bytes, "
                                f"got {msg.ciphertexts.shape}")
        bits_per_ciphertext = msg.slot_bits * (2 if msg.pack_gradients else 1)
        if msg.slot_bits < 2 or msg.offset < 1 or msg.ciphertexts_per_plaintext < 1 \
                or bits_per_ciphertext * msg.ciphertexts_per_plaintext > self.public.plaintext_bits:
            raise ProtocolError("slot layout does not fit the key's plaintext space")
        self.layout = SlotLayout(msg.offset, msg.slot_bits, msg.pack_gradients, msg.ciphertexts_per_plaintext)
        # this tree's sampled rows only, in shards indexed by sample position: what this party
        # stores is bounded by what it was sent, whatever the key size
        self._ciphertexts = self._bins = None  # the last tree's shards go before this tree's are stored
        self._sampled = rows
        backend = self.pool.backend
        self._ciphertexts = RowShards.split(backend, msg.ciphertexts.reshape(rows.size, slots, size),
                                            backend.shard_rows)
        self._bins = RowShards.split(backend, self.columns.binned_by_feature[:, rows], backend.shard_rows, axis=1)
        self._slots = slots
        self._cache = {}
        self._open_tree(msg.tree, rows)
        return Ack()

    def _set_key(self, msg: PublicKeyMessage):
        if msg.scheme != self.options.scheme:
            raise ProtocolError(f"the active party uses scheme {msg.scheme!r}; this party is set to "
                                f"{self.options.scheme!r}: every party must set the same [protocol] scheme")
        try:
            numbers = {name: int(value, 16) for name, value in json.loads(msg.numbers).items()}
        except (ValueError, TypeError, AttributeError):
            raise ProtocolError("malformed public key") from None
        try:
            public = public_from_numbers(msg.scheme, numbers)
        except KeyError:
            raise ProtocolError("malformed public key") from None
        if public.bits < 2048 and not self.options.insecure_key_bits:
            raise ProtocolError(f"the active party's key has {public.bits} bits; this party requires 2048")
        limit = max(_LARGEST_PEER_KEY_BITS, self.options.key_bits)
        if public.bits > limit:  # every bin sum's cost grows with the square of the key size
            raise ProtocolError(f"the active party's key has {public.bits} bits; this party takes at most {limit} "
                                "(raise [protocol] key_bits to accept larger keys)")
        if self.pool is not None:
            self.pool.close()
        self.public = public
        self.pool = CryptoPool(self.public, workers=self.options.crypto_workers,
                               pool_id=f"passive-{uuid.uuid4().hex}", backend=self.backend)
        return Ack()

    def _sum_node(self, rows: np.ndarray) -> list[mpz]:
        """Encrypted (features x width x slots) sums over ``rows``, flattened in that order."""
        positions = np.searchsorted(self._sampled, rows)
        if rows.size and (positions[-1] >= self._sampled.size or not np.array_equal(self._sampled[positions], rows)):
            raise ProtocolError("a node holds rows that were not sampled for this tree")
        return self.pool.bin_sums_sharded(self._ciphertexts, self._bins, positions, self.width)

    def _level(self, nodes, node_rows):
        started = time.perf_counter()
        n2 = self.public.ciphertext_modulus
        plan = plan_level(nodes, node_rows, set(self._cache))
        computed: dict[int, list[mpz]] = {}
        for node in plan.build:
            computed[node] = self._sum_node(node_rows.rows(node))
        for node, parent, sibling in plan.derive:
            computed[node] = [p * gmpy2.invert(s, n2) % n2 for p, s in zip(self._cache[parent], computed[sibling])]
        self._cache = computed
        slots = self._slots
        cells = meaningful_bins(self.columns.bins.n_value_bins, self.width)
        flat: list[mpz] = []
        counts = np.zeros((len(nodes), self.columns.n_features, self.width), dtype=np.int64)
        for i, node in enumerate(nodes):
            sums = computed[node]
            for f, b in cells:
                base = (f * self.width + b) * slots
                flat.extend(sums[base:base + slots])
            binned = self.columns.binned_by_feature[:, node_rows.rows(node)]
            for f in range(self.columns.n_features):
                counts[i, f] = np.bincount(binned[f], minlength=self.width)
        layout = self.layout
        packed = self.pool.pack(flat, layout.ciphertexts_per_plaintext, layout.ciphertext_bits)
        size = self.public.ciphertext_bytes
        blob = b"".join(int(c).to_bytes(size, "big") for c in packed)
        self.timer.add("homomorphic sums", started)
        return EncryptedHistograms(self._tree, counts,
                                   np.frombuffer(blob, dtype=np.uint8).reshape(len(packed), size))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
