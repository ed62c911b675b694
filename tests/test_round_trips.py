"""Round trips, as a wide-area link feels them: every exchange with the passive parties (one
or several at once) is one, counted where every protocol's frames pass (``Channel``), and the
run reports them per tree grown, for each protocol."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize("protocol", ["plain", "secureboost"])
def test_with_one_passive_party_a_level_it_won_costs_one_round_trip(protocol):
    """The split request of a level the passive party won asks the next level's histograms
    too: a tree costs its gradients, one exchange per level and the last level's split, at
    most depth + 2 (issue #39), where it took up to two per level."""
    active, passives, _, _ = workload(2000)
    params = BoostParams(n_trees=2, max_depth=6, max_bin=64, subsample=1.0)
    _, run = train_local(active, passives, params, protocol, options=ProtocolOptions(scheme="ou"))
    assert run.round_trips_per_tree <= params.max_depth + 2, run.round_trips_per_tree


def test_a_next_level_answered_for_other_nodes_is_refused(monkeypatch):
    """A passive party that answers the next level for nodes the active party's grower does not
    search (here: the first one left out) is refused, naming it, never scored from."""
    import dataclasses

    from teeboost.errors import ProtocolError
    from teeboost.protocols.enclave.partition import SplitReply
    from teeboost.transport import inmemory, serde

    original = inmemory.answer_frame

    def answer(handler, frame):
        reply = original(handler, frame)
        msg = serde.decode(reply)
        if isinstance(msg, SplitReply) and msg.next_nodes.size > 1:
            return serde.encode(dataclasses.replace(msg, next_nodes=msg.next_nodes[1:]))
        return reply

    monkeypatch.setattr(inmemory, "answer_frame", answer)
    active, passives, _, _ = workload(2000)
    with pytest.raises(ProtocolError, match=r"party 1 answered the next level for nodes"):
        train_local(active, passives, BoostParams(n_trees=1, max_depth=6, max_bin=64, subsample=1.0), "plain")


def test_a_protocol_that_does_not_merge_levels_refuses_the_request():
    """Only plain and SecureBoost answer a split request with the next level: a 1-TEE passive
    party asked for it refuses (its histograms go to the enclave, not back with a split)."""
    from teeboost.errors import ProtocolError
    from teeboost.protocols.enclave.partition import SplitRequest
    from teeboost.protocols.scoring.level_loop import PassiveScoring

    class Refusing(PassiveScoring):
        def _begin_tree(self, msg):
            raise AssertionError

        def _level(self, nodes, node_rows):
            raise AssertionError("no histogram may be computed")

    from types import SimpleNamespace

    party = Refusing(SimpleNamespace(n_rows=4))
    party._open_tree(0, np.arange(4))
    request = SplitRequest(0, *(np.zeros(0, t) for t in ("int32", "int32", "int32", "int32", "int64", "bool",
                                                         "uint64")), next_min_rows=2)
    with pytest.raises(ProtocolError, match="does not answer the next level"):
        party.handle(request)
