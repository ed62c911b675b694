import numpy as np
import pytest

from teeboost.core.loss import Logistic, Softmax, SquaredError, infer_objective


@pytest.mark.parametrize("objective, y", [
    (Logistic(), np.array([0.0, 1.0, 1.0, 0.0])),
    (SquaredError(), np.array([1.5, -2.0, 0.0, 3.0])),
])
def test_gradient_matches_finite_difference(objective, y):
    margin = np.array([[0.3], [-1.2], [2.0], [0.0]])

    def loss(m):
        if isinstance(objective, Logistic):
            p = 1 / (1 + np.exp(-m[:, 0]))
            return -(y * np.log(p) + (1 - y) * np.log(1 - p))
        return 0.5 * (m[:, 0] - y) ** 2

    g, h = objective.gradients(y, margin)
    eps = 1e-6
    numeric = (loss(margin + eps) - loss(margin - eps)) / (2 * eps)
    assert np.allclose(g[:, 0], numeric, atol=1e-6)
    numeric_h = (loss(margin + eps) - 2 * loss(margin) + loss(margin - eps)) / eps**2
    assert np.allclose(h[:, 0], numeric_h, atol=1e-3)


def test_softmax_gradients_sum_to_zero_per_row():
    objective = Softmax(3)
    y = np.array([0.0, 2.0, 1.0])
    g, h = objective.gradients(y, np.random.default_rng(0).normal(size=(3, 3)))
    assert np.allclose(g.sum(axis=1), 0)
    assert np.all(h > 0)


def test_objective_inference():
    assert infer_objective(np.array([0.0, 1.0, 1.0])) == "binary"
    assert infer_objective(np.array([0.0, 1.0, 2.0, 2.0])) == "multiclass"
    assert infer_objective(np.array([0.5, 1.25, 2.0])) == "regression"
