"""Online scoring attacked as a malicious active host would (red team of issue #34), with a
real passive party process: rows routed by handle without blinding are still charged to the
passive party's daily row budget; a scoring takes at most a path's levels; a handle looked up
in one id set version is never applied to another's rows (refused, then scored right)."""

from __future__ import annotations

import dataclasses
import re
import secrets
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.errors import ProtocolError
from teeboost.model_files import load_active
from teeboost.protocols.online import OnlineIdsAsk, OnlineRoute
from teeboost.serving.federated import FederatedScorer
from teeboost.transport.grpc_transport import GrpcChannel

from ..helpers import stop_passive_parties
from .test_online_federated import _scorer_rows


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("attacks")
    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 5, "max_depth": 3}, rows=3000)
    passive = configs["passive-1"]
    passive.write_text(re.sub(r"max_bits_per_row_per_day = \d+", "max_bits_per_row_per_day = 100000",
                              passive.read_text()).replace("[policy]\n", "[policy]\nmax_prediction_rows_per_day = 2000\n"))
    process, address = start_passive(passive, tmp_path / "passive-1.address", tmp_path / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    trained = subprocess.run([sys.executable, "-m", "teeboost.cli", "party", "--config", str(configs["active"]),
                              "--protocol", "ntee", "--json"], capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stderr
    yield tmp_path, configs
    stop_passive_parties(configs["active"], [process])


def _channel(config):
    return GrpcChannel(config.peers, sender=config.name, tls=config.tls, timeout=30, online=True)


def _passive_root(model):
    """A passive party's split record (one question per row: a path's worth)."""
    for tree in model.ensemble.trees:
        for party, record in zip(tree.party, tree.record):
            if party == 1:
                return int(record)
    raise AssertionError("the model has no passive split")


def test_routing_by_handle_without_blinding_is_charged_and_bounded(federation):
    tmp_path, configs = federation
    config = load_config(configs["active"])
    model = load_active(config.model_dir / "active.json")
    from teeboost.parties.active import ensemble_digest

    digest, record = ensemble_digest(model.ensemble), _passive_root(model)
    channel = _channel(config)
    try:
        ids = channel.request(1, OnlineIdsAsk(""))
        version = ids.version

        def route(handles, batch):
            handles = np.asarray(handles, dtype=np.int64)
            return channel.request(1, OnlineRoute(digest, version, batch, handles,
                                                  np.full(handles.size, record, np.int32),
                                                  np.arange(handles.size, dtype=np.uint16)))

        # the run's 812 held-out rows are on the day's budget of 2000 (and the other test's few)
        batch = secrets.token_bytes(16)
        route(range(40), batch)  # 40 rows, never blinded: charged all the same
        route(range(40), batch)  # the same scoring's next level: no new row
        with pytest.raises(ProtocolError, match="max_prediction_rows_per_day"):
            route(range(40, 1540), secrets.token_bytes(16))  # 1500 more rows: past the day's 2000
        for _ in range(2, model.params.get("max_depth", 3) + 0):
            route(range(5), batch)
        with pytest.raises(ProtocolError, match="at most 3 levels"):
            route(range(5), batch)  # a scoring takes at most the model's depth in levels
    finally:
        channel.close()


@pytest.mark.serial  # the refused batch's retry waits one [serving] timeout for a session attested again
def test_a_handle_is_never_applied_to_another_versions_rows(federation):
    """The passive party's rows all move while a batch is between its lookup and its routing
    (a health check refreshed the id set meanwhile): the old handles are refused and the batch
    looked up again, and the scores equal those before the move."""
    tmp_path, configs = federation
    config = load_config(configs["active"])
    # the refused batch's retry waits one [serving] timeout for its new session: 10 s, not 2,
    # so that a loaded CI machine does not fail it (this is a test of which rows, not of how fast)
    config = dataclasses.replace(config, serving=dataclasses.replace(config.serving, timeout=10.0))
    ids, features = _scorer_rows(tmp_path, config, 20, skip=2000)
    scorer = FederatedScorer(config, "credit")
    try:
        before = scorer.score(ids, features)
        cache = scorer.caches[1]
        original = cache.handles
        path = tmp_path / "passive-1.csv"
        moved = []

        def handles_then_move(channel, asked):
            found = original(channel, asked)
            if not moved:
                moved.append(True)
                frame = pd.read_csv(path, dtype={"id": str}).sample(frac=1.0, random_state=3)
                frame.to_csv(tmp_path / "moved.csv", index=False)
                (tmp_path / "moved.csv").replace(path)
                deadline = time.monotonic() + 30
                while cache.version == found[0] and time.monotonic() < deadline:  # the new set, once built
                    scorer.health()
                    time.sleep(0.2)
                assert cache.version != found[0]
            return found

        cache.handles = handles_then_move
        after = scorer.score(ids, features)
        assert moved and [r is None for r in after.reasons] == [r is None for r in before.reasons]
        np.testing.assert_array_equal(after.values, before.values)
    finally:
        scorer.close()
