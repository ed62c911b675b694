"""Round trips, as a wide-area link feels them: every exchange with the passive parties (one
or several at once) is one, counted where every protocol's frames pass (``Channel``), and the
run reports them per tree grown, for each protocol."""

from __future__ import annotations

import pytest

from teeboost.bench.point import workload
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.federation import train_local
from teeboost.transport import base


@pytest.mark.parametrize("protocol", ["plain", "secureboost", "ntee", "onetee", "strict"])
def test_the_run_reports_every_exchange_and_those_per_tree(protocol, monkeypatch):
    exchanges: list[list[str]] = []
    honest = base.Channel._request_all

    def counted(self, messages):
        exchanges.append(sorted(type(m).__name__ for m in messages.values()))
        return honest(self, messages)

    monkeypatch.setattr(base.Channel, "_request_all", counted)
    active, passives, _, _ = workload(600, passive_parties=2)
    setup = []
    for n_trees in (2, 4):
        exchanges.clear()
        params = BoostParams(n_trees=n_trees, max_depth=3, max_bin=32, subsample=1.0)
        _, run = train_local(active, passives, params, protocol,
                             options=ProtocolOptions(scheme="ou", allow_simulated_tee=True))
        assert run.traffic["round_trips"] == len(exchanges)  # two parties asked at once: one round trip
        assert run.traffic["messages"] == 2 * sum(len(e) for e in exchanges)  # a request and a reply each
        per_tree = run.round_trips_per_tree
        assert run.to_dict()["round_trips_per_tree"] == per_tree
        assert per_tree >= params.max_depth  # a level needs the passive parties' part at least once
        grown = per_tree * n_trees
        assert grown == pytest.approx(round(grown))
        setup.append(len(exchanges) - round(grown))
    # what is not per tree (handshake, alignment, the model's announcement) does not grow with the trees
    assert setup[0] == setup[1] > 0
