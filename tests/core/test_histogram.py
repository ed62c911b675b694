import numpy as np

from teeboost.core.gradients import EncodedGradients
from teeboost.core.histogram import HistogramBuilder, plan_level
from teeboost.core.nodes import NodeRows


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
