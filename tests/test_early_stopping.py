import numpy as np

from teeboost import VerticalBoostClassifier


def test_early_stopping_keeps_the_best_round_everywhere(credit_parties):
    active, passives = credit_parties
    train, valid = np.arange(0, 12000), np.arange(12000, 16000)
    model = VerticalBoostClassifier(n_trees=60, learning_rate=0.9, max_depth=5, early_stopping_rounds=3, subsample=0.8, max_bin=32)
    model.fit(active.take(train), [p.take(train) for p in passives],
              eval_set=(active.take(valid), [p.take(valid) for p in passives]))
    fitted = model.model_
    kept = len(fitted.active.ensemble.trees)
    assert kept < 60 and kept == fitted.active.ensemble.best_round + 1
    metrics = [t["valid_metric"] for t in model.report_["per_tree"]]
    assert max(metrics) == metrics[kept - 1]
    # no party keeps split records of discarded trees
    for owner in [fitted.active.owner] + [p.owner for p in fitted.passives]:
        assert all(record.tree < kept for _, record in owner.items())
