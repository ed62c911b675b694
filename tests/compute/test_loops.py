"""The engine's numpy loops give identical results in this process, on local worker
processes and on Ray: histograms, binning, routing answers and 1-TEE index-set ring sums."""

from __future__ import annotations

import numpy as np
import pytest

from teeboost.compute import LocalBackend
from teeboost.core.binning import fit_bins
from teeboost.core.columns import PartyColumns
from teeboost.core.gradients import EncodedGradients, GradientCodec
from teeboost.core.histogram import HistogramBuilder
from teeboost.core.histogram_jobs import ShardedHistogramBuilder, histogram_builder
from teeboost.core.nodes import NodeRows
from teeboost.core.offload import offloads
from teeboost.core.routing import Router, route_answers
from teeboost.core.split import SplitCriteria
from teeboost.core.tree import OwnerTable, SplitRecord

N_ROWS = 3000  # about three shards of 1024 rows
WIDTH = 9  # 8 value bins and the missing bin


@pytest.fixture(scope="module")
def local2():
    """Two local worker processes, asked for explicitly, with the Ray fixture's shard size."""
    return LocalBackend(workers=2, shard_rows=1024)


@pytest.fixture(params=["local2", "ray"])
def backend(request):
    return request.getfixturevalue("ray_backend" if request.param == "ray" else "local2")


@pytest.fixture(scope="module")
def raw() -> np.ndarray:
    """Numeric columns with missing values, a constant column, and category codes."""
    rng = np.random.default_rng(11)
    columns = [rng.normal(size=N_ROWS), rng.integers(0, 5, N_ROWS).astype(np.float64),
               np.full(N_ROWS, 2.5), rng.integers(0, 7, N_ROWS).astype(np.float64)]
    matrix = np.column_stack(columns)
    matrix[rng.random(N_ROWS) < 0.1, 0] = np.nan
    matrix[rng.random(N_ROWS) < 0.2, 3] = np.nan
    matrix[:50, 2] = np.nan
    return matrix


CATEGORICAL = np.array([False, False, False, True])


def test_only_clusters_and_explicit_local_workers_take_numpy_loops(local2, ray_backend):
    assert offloads(ray_backend) and offloads(local2)
    assert not offloads(None) and not offloads(LocalBackend()) and not offloads(LocalBackend(workers=1))
    bins = np.zeros((2, 10), dtype=np.uint8)
    assert type(histogram_builder(bins, 4, LocalBackend())) is HistogramBuilder
    assert type(histogram_builder(bins, 4, None)) is HistogramBuilder
    assert isinstance(histogram_builder(bins, 4, ray_backend), ShardedHistogramBuilder)


# --- binning -------------------------------------------------------------------------------

def test_binning_is_identical(backend, raw):
    expected = fit_bins(raw, 8, categorical=CATEGORICAL)
    bins = fit_bins(raw, 8, categorical=CATEGORICAL, backend=backend)
    assert bins.categorical == expected.categorical and bins.max_bin == expected.max_bin
    for got, want in zip(bins.cuts, expected.cuts, strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    for rows in (np.arange(N_ROWS), np.arange(0), np.arange(1), np.arange(1000, 2100), np.arange(N_ROWS)[::-7]):
        got = expected.transform(raw[rows], backend=backend)
        want = expected.transform(raw[rows])
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_binning_of_all_missing_and_empty_columns(backend):
    raw = np.full((500, 2), np.nan)
    raw[::3, 1] = 1.0
    for max_bin in (2, 300):  # uint8 and uint16 bins
        expected = fit_bins(raw, max_bin)
        bins = fit_bins(raw, max_bin, backend=backend)
        assert [c.tolist() for c in bins.cuts] == [c.tolist() for c in expected.cuts]
        assert np.array_equal(bins.transform(raw, backend=backend), expected.transform(raw))
        assert bins.transform(raw, backend=backend).dtype == expected.dtype


# --- histograms ----------------------------------------------------------------------------

def _gradients(n_rows: int, seed: int) -> EncodedGradients:
    rng = np.random.default_rng(seed)
    return EncodedGradients(rng.integers(-2**40, 2**40, n_rows), rng.integers(0, 2**40, n_rows), None)


def _grow_levels(builder: HistogramBuilder, binned: np.ndarray, seed: int) -> list[np.ndarray]:
    """Three levels of a tree whose splits include an empty child, a one-row child and
    children spanning shards; every level's histograms."""
    rng = np.random.default_rng(seed)
    nodes = NodeRows(binned.shape[1])
    nodes.set_root(np.flatnonzero(rng.random(binned.shape[1]) < 0.9))
    out = [builder.level([0], nodes)]
    nodes.split(0, 1, 2, nodes.rows(0)[rng.random(nodes.size(0)) < 0.4])
    out.append(builder.level([1, 2], nodes))
    nodes.split(1, 3, 4, nodes.rows(1))  # everything left: an empty right child
    nodes.split(2, 5, 6, nodes.rows(2)[:1])  # one row left
    out.append(builder.level([3, 4, 5, 6], nodes))
    return out


def test_histograms_are_identical(backend, raw):
    bins = fit_bins(raw, 8, categorical=CATEGORICAL)
    binned = np.ascontiguousarray(bins.transform(raw).T)
    gradients = _gradients(N_ROWS, 1)
    reference = HistogramBuilder(binned, WIDTH)
    sharded = histogram_builder(binned, WIDTH, backend)
    assert isinstance(sharded, ShardedHistogramBuilder)
    for min_job_rows in (sharded.min_job_rows, 1):  # small nodes here, then every node as jobs
        sharded.min_job_rows = min_job_rows
        for builder in (reference, sharded):
            builder.begin_tree(gradients)
        for want, got in zip(_grow_levels(reference, binned, 2), _grow_levels(sharded, binned, 2), strict=True):
            assert got.dtype == np.int64 and np.array_equal(got, want)
        assert sharded._pool is not None  # jobs ran
        rng = np.random.default_rng(3)
        for rows in (np.arange(0), np.array([1500]), np.arange(900, 2200), rng.permutation(N_ROWS)[:1700],
                     np.arange(N_ROWS)):
            assert np.array_equal(sharded.sum_rows(rows), reference.sum_rows(rows))
        for builder in (reference, sharded):
            builder.end_tree()
    sharded.close()


def test_rows_carrying_their_own_values_are_summed_here(backend, raw):
    """The enclave-style path (node rows with their own g and h) never leaves the process."""
    binned = np.ascontiguousarray(fit_bins(raw, 8).transform(raw).T)
    gradients = _gradients(N_ROWS, 4)
    sharded = histogram_builder(binned, WIDTH, backend)
    sharded.begin_tree(None)
    nodes = NodeRows(N_ROWS)
    rows = np.arange(N_ROWS)
    nodes.set_root(rows, (gradients.g, gradients.h))
    reference = HistogramBuilder(binned, WIDTH)
    reference.begin_tree(gradients)
    assert np.array_equal(sharded.level([0], nodes), reference.sum_rows(rows)[None])
    assert sharded._bin_shards is None  # nothing was stored on the backend


def test_party_columns_find_the_same_splits(backend, raw):
    bins = fit_bins(raw, 8, categorical=CATEGORICAL)
    binned = bins.transform(raw)
    here, there = PartyColumns(bins, binned), PartyColumns(bins, binned, backend=backend)
    assert there.backend is backend and isinstance(there.histograms, ShardedHistogramBuilder)
    gradients = _gradients(N_ROWS, 5)
    criteria = SplitCriteria(category_subsets=True)
    nodes = NodeRows(N_ROWS)
    nodes.set_root(np.arange(N_ROWS))
    bests = []
    for columns in (here, there):
        columns.begin_tree(gradients)
        bests.append(columns.best([0], nodes, GradientCodec(40), criteria))
        columns.end_tree()
    assert bests[0] == bests[1]


# --- routing -------------------------------------------------------------------------------

def _owner() -> OwnerTable:
    owner = OwnerTable()
    owner.add(SplitRecord(0, 0.1, missing_left=True, tree=0))
    owner.add(SplitRecord(0, -0.5, missing_left=False, tree=0))
    owner.add(SplitRecord(1, 2.0, missing_left=False, tree=1))
    owner.add(SplitRecord(3, 0.0, missing_left=True, tree=1, categories=0b1010110))
    owner.add(SplitRecord(3, 0.0, missing_left=False, tree=2, categories=0b1))
    owner.add(SplitRecord(2, 2.5, missing_left=False, tree=2))
    return owner


def _questions(seed: int) -> list[tuple[int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (0, np.arange(N_ROWS)),  # every shard
        (1, rng.permutation(N_ROWS)[:1200]),  # unsorted
        (3, np.arange(0)),  # no rows
        (4, np.array([2999])),  # one row, in the last shard
        (2, np.arange(1000, 1100)[::-1]),  # across a shard boundary, backwards
        (3, rng.integers(0, N_ROWS, 700)),  # repeated rows
        (5, np.arange(0, N_ROWS, 3)),
        (0, np.array([5, 3, 2047, 1024, 1023])),
    ]


def test_routing_answers_are_identical(backend, raw):
    owner = _owner()
    questions = _questions(6)
    want = [owner.go_left(raw, record, rows) for record, rows in questions]
    router = Router(backend)
    assert router.backend is backend
    for _ in range(2):  # the second request reads the shards stored by the first
        got = router.answers(owner, "predict", raw, questions)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.bool_ and np.array_equal(g, w)
    assert router._pool is not None  # jobs ran
    stored = router._datasets["predict"][1]
    assert len(stored.stored) == 3
    router.answers(owner, "predict", raw, questions[:1])
    assert router._datasets["predict"][1] is stored
    other = raw[::-1].copy()  # a new array under the same name: stored again
    got = router.answers(owner, "predict", other, questions)
    assert all(np.array_equal(g, owner.go_left(other, r, rows)) for g, (r, rows) in zip(got, questions))
    assert router._datasets["predict"][1] is not stored
    assert [a.tolist() for a in route_answers(owner, raw, questions, backend)] == [w.tolist() for w in want]
    assert route_answers(owner, raw, [], backend) == []
    router.close()


def test_routing_refuses_what_the_owner_refuses(backend, raw):
    from teeboost.errors import ProtocolError

    router = Router(backend)
    with pytest.raises(ProtocolError, match="unknown split record id 99"):
        router.answers(_owner(), "predict", raw, [(0, np.arange(N_ROWS)), (99, np.arange(5))])
    with pytest.raises(IndexError):
        router.answers(_owner(), "predict", raw, [(0, np.arange(N_ROWS + 1))])
    router.close()


def test_passive_party_and_active_oracle_route_on_the_backend(backend, raw):
    from teeboost.parties.active import FederatedOracle
    from teeboost.protocols.messages import RouteRequest
    from teeboost.parties.passive import PassiveParty
    from teeboost.protocols.enclave.partition import encode_row_sets

    owner = _owner()
    questions = [(record, np.unique(rows)) for record, rows in _questions(7)]  # requests carry sorted sets
    want = [owner.go_left(raw, record, rows) for record, rows in questions]
    encodings, offsets, payload = encode_row_sets([rows for _, rows in questions], N_ROWS)
    request = RouteRequest("predict", N_ROWS, np.array([r for r, _ in questions], dtype=np.int64),
                           encodings, offsets, payload)
    replies = []
    for party_backend in (None, backend):
        party = PassiveParty(1, "p", ["a", "b", "c", "d"], owner, backend=party_backend)
        party.add_dataset("predict", raw)
        replies.append(party.handle(request))
        party.close()
    assert replies[0].n_answers == replies[1].n_answers and np.array_equal(replies[0].bits, replies[1].bits)
    assert np.array_equal(np.unpackbits(replies[1].bits, count=replies[1].n_answers).astype(bool),
                          np.concatenate(want))
    oracle = FederatedOracle(None, "predict", owner, raw, backend=backend)
    got = oracle.route({0: questions})[0]
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


# --- 1-TEE index-set sums ------------------------------------------------------------------

class _ClearChannel:
    """Stands in for the enclave channel: 'seals' a frame as itself, to compare frames."""

    def seal(self, frame: bytes) -> bytes:
        return bytes(frame)


def _onetee_passive(columns: PartyColumns, compute):
    from teeboost.config import ProtocolOptions
    from teeboost.federation import _environments
    from teeboost.protocols.onetee.hosts import OneTeePassive

    env = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1, None)[1]
    env.compute = compute
    party = OneTeePassive(columns, env, 1)
    party._channel = _ClearChannel()
    return party


def test_onetee_index_set_sums_are_identical(backend, raw):
    from teeboost.protocols.onetee.hosts import MaskedGradients
    from teeboost.protocols.enclave.partition import encode_row_sets

    bins = fit_bins(raw, 8, categorical=CATEGORICAL)
    binned = bins.transform(raw)
    rng = np.random.default_rng(8)
    rows = np.flatnonzero(rng.random(N_ROWS) < 0.95)
    masked_g = rng.integers(0, 2**64, rows.size, dtype=np.uint64)  # uniform pads: sums wrap around
    masked_h = rng.integers(0, 2**64, rows.size, dtype=np.uint64)
    encoding, offsets, payload = encode_row_sets([rows], N_ROWS)
    gradients = MaskedGradients(0, N_ROWS, encoding, offsets, payload, masked_g, masked_h)
    frames = []
    for compute, columns in ((None, PartyColumns(bins, binned)), (backend, PartyColumns(bins, binned, backend=backend))):
        party = _onetee_passive(columns, compute)
        party.handle(gradients)
        nodes = party._node_rows
        records = [party._level([0], nodes).record]
        left = nodes.rows(0)[rng.random(nodes.size(0)) < 0.35] if not frames else frames[-1][1]
        nodes.split(0, 1, 2, left)
        records.append(party._level([1, 2], nodes).record)
        nodes.split(1, 3, 4, nodes.rows(1)[:1])  # a one-row child, summed here
        nodes.split(2, 5, 6, nodes.rows(2))  # and an empty one
        records.append(party._level([3, 4, 5, 6], nodes).record)
        if compute is not None:
            assert party._masked_shards is not None and party._bin_shards is columns.histograms.bin_shards
            assert party._compute_pool is not None  # jobs ran
        frames.append((records, left))
    for want, got in zip(frames[0][0], frames[1][0], strict=True):
        assert got == want
