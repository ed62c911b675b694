"""Strict online scoring with two passive parties: no repeat is free.

The threat: the label owner's host wants party A's part of a customer's margin more precisely
than one quantized score tells. With one passive party the same question again is the same
answer again, free. With two, A's enclave binds the tag to A's answer only: after party B's
data changed, the same question was free at A while the released score moved by B's change,
so each daily update of B's data gave the host one more quantized view of A's part, uncharged
at A (red team). The active enclave now salts the tags when there are two or more passive
parties, so every score is charged at every party.
"""

from __future__ import annotations

import pandas as pd
import pytest

from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.serving.federated import FederatedScorer

from ..helpers import stop_passive_parties
from .helpers import fresh_customer, model_inputs
from .test_online_federated import TRAINING, cli


@pytest.mark.serial
def test_with_two_passive_parties_a_repeat_after_the_other_partys_change_is_charged_again(tmp_path):
    configs = write_federation(tmp_path, n_passive=2, training=TRAINING)
    text = configs["passive-1"].read_text()
    configs["passive-1"].write_text(text.replace("max_bits_per_row_per_day = 256", "max_bits_per_row_per_day = 8"))
    processes, addresses = [], {}
    for k in (1, 2):
        process, address = start_passive(configs[f"passive-{k}"], tmp_path / f"passive-{k}.address",
                                         tmp_path / f"passive-{k}.log")
        processes.append(process)
        addresses[k] = (f"passive-{k}", address)
    set_peer_addresses(configs["active"], addresses)
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
        config = load_config(configs["active"])
        customer, row = fresh_customer(tmp_path, n_passive=2)
        features = model_inputs(config, row)
        scorer = FederatedScorer(config, "credit")
        try:
            first = scorer.score([customer], features)
            assert first.reasons == [None]  # 8 bits at each party: party 1's day is spent
            passive_2 = tmp_path / "passive-2.csv"  # party 2's daily update changes the customer's values
            frame = pd.read_csv(passive_2, dtype={"id": str})
            numeric = [c for c in frame.columns if c != "id" and pd.api.types.is_numeric_dtype(frame[c])]
            frame.loc[frame["id"] == customer, numeric] = frame.loc[frame["id"] == customer, numeric] + 1.0
            frame.to_csv(tmp_path / "passive-2.tmp", index=False)
            (tmp_path / "passive-2.tmp").replace(passive_2)
            again = scorer.score([customer], features)
        finally:
            scorer.close()
    finally:
        stop_passive_parties(configs["active"], processes)
    # the same question again: charged at party 1 too, and refused there, whatever party 2 holds now
    assert again.reasons[0] is not None and "passive-1" in again.reasons[0], again.reasons
    assert "max_bits_per_row_per_day" in again.reasons[0] or "budget" in again.reasons[0], again.reasons
