import numpy as np
import pytest

from teeboost.core.gradients import EncodedGradients
from teeboost.core.histogram import HistogramBuilder, plan_level
from teeboost.core.nodes import NodeRows
from teeboost.core.packed import PackedInts


def brute_force(bins, rows, g, h, width):
    out = np.zeros((bins.shape[0], width, 3), dtype=np.int64)
    for j in range(bins.shape[0]):
        for r in rows:
            out[j, bins[j, r]] += (g[r], h[r], 1)
    return out


def test_histograms_and_sibling_subtraction_match_brute_force():
    rng = np.random.default_rng(3)
    n, width = 400, 9
    bins = rng.integers(0, width, (4, n)).astype(np.uint8)
    g = rng.integers(-1000, 1000, n)
    h = rng.integers(0, 1000, n)
    grad = EncodedGradients(g.astype(np.int64), h.astype(np.int64), None)
    builder = HistogramBuilder(bins, width)
    builder.begin_tree(grad)
    nodes = NodeRows(n)
    root = np.arange(n)
    nodes.set_root(root)
    (root_hist,) = builder.level([0], nodes)
    assert np.array_equal(root_hist, brute_force(bins, root, g, h, width))
    left = root[rng.random(n) < 0.3]
    nodes.split(0, 1, 2, left)
    plan = plan_level([1, 2], nodes, {0})
    assert plan.build == (1,) and plan.derive == ((2, 0, 1),)  # smaller child built
    hist_1, hist_2 = builder.level([1, 2], nodes)
    assert np.array_equal(hist_1, brute_force(bins, nodes.rows(1), g, h, width))
    assert np.array_equal(hist_2, brute_force(bins, nodes.rows(2), g, h, width))


def test_node_rows_rejects_foreign_rows():
    import pytest

    from teeboost.errors import ProtocolError

    nodes = NodeRows(10)
    nodes.set_root(np.array([0, 2, 4, 6]))
    with pytest.raises(ProtocolError, match="not in the node"):
        nodes.split(0, 1, 2, np.array([0, 3]))
    with pytest.raises(ProtocolError, match="out-of-range"):
        nodes.split(0, 1, 2, np.array([0, 11]))
    right = nodes.split(0, 1, 2, np.array([2, 6]))
    assert right.tolist() == [0, 4]


def test_sums_in_blocks_of_rows_equal_one_pass(monkeypatch):
    """A node larger than a block is summed a block at a time; the exact sums do not change."""
    import teeboost.core.histogram as histogram

    rng = np.random.default_rng(5)
    n, width = 1000, 7
    bins = rng.integers(0, width, (3, n)).astype(np.uint8)
    g = rng.integers(-2**40, 2**40, n)
    h = rng.integers(0, 2**40, n)
    rows = np.flatnonzero(rng.random(n) < 0.7)
    builder = HistogramBuilder(bins, width)
    builder.begin_tree(EncodedGradients(g, h, None))
    monkeypatch.setattr(histogram, "ROW_BLOCK", 64)
    assert np.array_equal(builder.sum_rows(rows), brute_force(bins, rows, g, h, width))


def test_a_split_node_hands_its_rows_to_its_children():
    """Only the newest level's rows are held."""
    from teeboost.errors import ProtocolError

    nodes = NodeRows(10)
    nodes.set_root(np.array([1, 3, 4, 7, 9]))
    went_left = np.array([True, False, False, True, True])
    right = nodes.split_mask(0, 1, 2, went_left)
    assert right.tolist() == [3, 4] and nodes.rows(1).tolist() == [1, 7, 9]
    assert 0 not in nodes
    assert nodes.parent(1) == 0 and nodes.sibling(1) == 2 and nodes.depth(2) == 1
    with pytest.raises(ProtocolError, match="one boolean per row"):
        nodes.split_mask(1, 3, 4, np.array([True, False]))
    with pytest.raises(ProtocolError, match="already exist"):
        nodes.split_mask(1, 2, 3, np.array([True, False, True]))
    with pytest.raises(ProtocolError, match="not a node"):
        nodes.split_mask(0, 5, 6, went_left)  # a split node is never split again


def test_node_ids_are_never_reused():
    """Red team: a node already split (here the root) named as a child made a parent cycle,
    and ``depth`` (the passive party's depth check) never returned: a host could hang a party."""
    from teeboost.errors import ProtocolError

    nodes = NodeRows(10)
    nodes.set_root(np.arange(6))
    nodes.split_mask(0, 1, 2, np.array([True, True, True, False, False, False]))
    for left, right in ((0, 3), (3, 0), (2, 3), (-1, 3)):
        with pytest.raises(ProtocolError, match="already exist"):
            nodes.split_mask(1, left, right, np.array([True, False, True]))
    nodes.split_mask(1, 3, 4, np.array([True, False, True]))
    assert nodes.depth(3) == 2 and nodes.depth(2) == 1
    nodes.set_root(np.arange(6))  # a new tree numbers from the root again
    nodes.split_mask(0, 1, 2, np.array([True, True, True, False, False, False]))


@pytest.mark.parametrize("packed", [False, True], ids=["int64", "packed"])
def test_gradients_travelling_with_node_rows_give_the_same_histograms(packed):
    """An enclave that keeps each node's (g, h) with its rows (nothing by dataset row, as int64
    or packed as they arrived) sums the same histograms, smaller child built and sibling
    derived, as one gathering from arrays by dataset row."""
    rng = np.random.default_rng(7)
    n, width = 600, 9
    bins = rng.integers(0, width, (3, n)).astype(np.uint8)
    g = rng.integers(-1000, 1000, n)
    h = rng.integers(0, 1000, n)
    rows = np.flatnonzero(rng.random(n) < 0.8)
    by_row, carried = HistogramBuilder(bins, width), HistogramBuilder(bins, width)
    by_row.begin_tree(EncodedGradients(g, h, None))
    carried.begin_tree(None)
    plain_nodes, carrying_nodes = NodeRows(n), NodeRows(n)
    plain_nodes.set_root(rows)
    carrying_nodes.set_root(rows, tuple(PackedInts.pack(v[rows]) if packed else v[rows] for v in (g, h)))
    assert np.array_equal(by_row.level([0], plain_nodes), carried.level([0], carrying_nodes))
    went_left = rng.random(rows.size) < 0.35
    for nodes in (plain_nodes, carrying_nodes):
        nodes.split_mask(0, 1, 2, went_left)
    carried_g = carrying_nodes.values(1)[0]
    assert (carried_g.unpack() if packed else carried_g).tolist() == g[carrying_nodes.rows(1)].tolist()
    both = by_row.level([1, 2], plain_nodes)
    assert np.array_equal(both, carried.level([1, 2], carrying_nodes))
    assert np.array_equal(both[1], brute_force(bins, plain_nodes.rows(2), g, h, width))  # the derived sibling


def test_splitting_in_place_gives_the_children_copying_gives():
    """A NodeRows that owns its arrays reorders them in place (children are views, nothing is
    copied); rows and values of every node are those a copying split gives."""
    rng = np.random.default_rng(11)
    rows = np.flatnonzero(rng.random(500) < 0.7)
    g = rng.integers(-2**30, 2**30, rows.size)
    copying, in_place = NodeRows(500), NodeRows(500, in_place=True)
    copying.set_root(rows.copy(), (g.copy(), PackedInts.pack(g)))
    root = rows.copy()
    in_place.set_root(root, (g.copy(), PackedInts.pack(g)))
    for node, (left, right) in ((0, (1, 2)), (1, (3, 4)), (2, (5, 6))):
        went_left = rng.random(copying.size(node)) < 0.4
        copying.split_mask(node, left, right, went_left)
        in_place.split_mask(node, left, right, went_left)
    for node in (3, 4, 5, 6):
        assert in_place.rows(node).tolist() == copying.rows(node).tolist()
        assert np.shares_memory(in_place.rows(node), root)
        (a, b), (c, d) = in_place.values(node), copying.values(node)
        assert a.tolist() == c.tolist() and b.unpack().tolist() == d.unpack().tolist()


def test_the_compiled_node_sums_equal_numpys_bincount_at_256_bins():
    """``histogram_kernel`` replaced three bincounts per feature: the sums must not change."""
    from teeboost.core.histogram import add_block
    from teeboost.core.histogram_kernel import sum_node, sum_node_aligned

    rng = np.random.default_rng(11)
    n, width = 5000, 257
    bins = rng.integers(0, width, (5, n)).astype(np.uint16)
    g = rng.integers(-2**40, 2**40, n)
    h = rng.integers(0, 2**40, n)
    rows = np.flatnonzero(rng.random(n) < 0.4)
    numpy_sums = np.zeros((5, width, 3), dtype=np.int64)
    add_block(numpy_sums, bins, rows, g[rows].astype(np.float64), h[rows].astype(np.float64))
    by_row = np.zeros_like(numpy_sums)
    sum_node(by_row, bins, rows, g, h)
    aligned = np.zeros_like(numpy_sums)
    sum_node_aligned(aligned, bins, rows, g[rows], h[rows])
    assert np.array_equal(by_row, numpy_sums) and np.array_equal(aligned, numpy_sums)
    assert numpy_sums[..., 2].sum() == 5 * rows.size


def test_an_enclave_without_the_compiled_kernel_sums_the_same(monkeypatch):
    """Enclaves run the module from source and sum with numpy: the histograms are the host's."""
    import teeboost.core.histogram as histogram

    rng = np.random.default_rng(12)
    n, width = 3000, 257
    bins = rng.integers(0, width, (3, n)).astype(np.uint16)
    g, h = rng.integers(-2**40, 2**40, n), rng.integers(0, 2**40, n)
    rows = np.flatnonzero(rng.random(n) < 0.5)
    builder = HistogramBuilder(bins, width)
    builder.begin_tree(EncodedGradients(g, h, None))
    compiled = builder.sum_rows(rows)
    assert histogram.sum_node is not None  # the test runs on a host
    monkeypatch.setattr(histogram, "sum_node", None)
    monkeypatch.setattr(histogram, "sum_node_aligned", None)
    assert np.array_equal(builder.sum_rows(rows), compiled)
    assert np.array_equal(builder.sum_rows(rows, (g[rows], h[rows])), compiled)
    assert np.array_equal(compiled, brute_force(bins, rows, g, h, width))


def test_node_totals_are_summed_once_and_a_sibling_is_its_parent_minus_the_other():
    rng = np.random.default_rng(8)
    n = 500
    grad = EncodedGradients(rng.integers(-2**62, 2**62, n), rng.integers(0, 2**62, n), None)  # sums wrap
    nodes = NodeRows(n)
    nodes.set_root(np.arange(n))
    went_left = rng.random(n) < 0.4
    nodes.split_mask(0, 1, 2, went_left)
    summed = []
    real_totals = grad.totals
    object.__setattr__(grad, "totals", lambda rows: summed.append(rows.size) or real_totals(rows))
    for node in (1, 2):  # the root's totals were never asked for: both children are summed
        assert nodes.totals(node, grad) == real_totals(nodes.rows(node))
    assert summed == [went_left.sum(), n - went_left.sum()]
    nodes.remember_totals(4, grad, real_totals(nodes.rows(2)[:10]))  # what a split check summed
    nodes.split_mask(2, 3, 4, np.arange(nodes.size(2)) >= 10)
    summed.clear()
    assert nodes.totals(4, grad) == real_totals(nodes.rows(4))  # remembered
    assert nodes.totals(3, grad) == real_totals(nodes.rows(3))  # parent minus sibling, wrapped as int64
    assert summed == []
    other = EncodedGradients(grad.g + 1, grad.h, None)  # another tree's gradients: nothing remembered is used
    assert nodes.totals(3, other) == (int((grad.g[nodes.rows(3)] + 1).sum()), int(grad.h[nodes.rows(3)].sum()))
