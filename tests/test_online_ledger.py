"""A strict passive enclave's online ledger charges what the rule says, request after request:
a row's bits in the last 24 hours (online and batch) plus this score's must stay within its
budget, and the same answer again (same row, same tag) is free. Checked against the rule
written out plainly, over random sequences with repeats, expiry and refusals; and the
ledger's comparison kernel is compiled at table load, never within a request."""

import json
import subprocess
import sys

import numpy as np
import pytest

from teeboost.protocols.strict.enclave import online_ledger
from teeboost.protocols.strict.enclave.ledger import DAY_SECONDS

TAG = 16
SCOPE = (1).to_bytes(4, "big") + bytes(32)  # party 1, for a label owner whose key hashes to zeros


class _Sealer:
    """Sealing is not what is tested here: the record's entries come back as they went in."""

    def seal(self, data, context):
        return data


def _entries(rng, n, key_bytes, now):
    return {"keys": rng.integers(0, 4, (n, key_bytes), dtype=np.uint8),
            "tags": rng.integers(0, 2, (n, TAG), dtype=np.uint8),
            "epochs": rng.choice([now - DAY_SECONDS - 10, now - 100, now], n).astype(float),
            "bits": rng.integers(0, 9, n).astype(np.int64)}


def _by_rule(history, batch, keys, tags, requests, cost, limit, now):
    """-> (refused per row, bits charged per asked row), from every entry charged so far,
    plainly: a request with a row over its budget is refused, and its rows charge nothing."""
    spent, seen = [], []
    for key, tag in zip(keys, tags):
        total, same = 0, False
        for entries in (history, batch):
            for k, t, e, b in zip(entries["keys"], entries["tags"], entries["epochs"], entries["bits"]):
                if e >= now - DAY_SECONDS and bytes(k[:8]) == bytes(key):
                    total += int(b)
                    same = same or (bytes(t) == bytes(tag) and b > 0)  # a charged answer, given again
        spent.append(total)
        seen.append(same)
    charged = [0 if s else cost for s in seen]
    # a customer named again in the batch: what its earlier rows charge counts too
    before = [sum(c for k, c in zip(keys[:j], charged[:j]) if bytes(k) == bytes(keys[j])) for j in range(len(keys))]
    over = {r for r, s, b, c in zip(requests, spent, before, charged) if limit and s + b + c > limit}
    refused = [r in over for r in requests]
    return refused, [0 if r else c for r, c in zip(refused, charged)]


@pytest.mark.parametrize("seed", range(8))
def test_charges_follow_the_rule_request_after_request(seed):
    rng = np.random.default_rng(seed)
    now = 1e9
    start = _entries(rng, int(rng.integers(0, 200)), 8, now)
    batch = _entries(rng, int(rng.integers(0, 40)), 16, now) if seed % 2 else online_ledger.empty_ledger()
    limit = int(rng.choice([0, 12, 30, 1000]))
    state = {"ledger": {k: v.copy() for k, v in start.items()}, "batch": batch, "max_bits_per_row": limit,
             "version": 5}
    history = {k: v.copy() for k, v in start.items()}
    for step in range(25):
        k = int(rng.integers(1, 9))
        keys = rng.integers(0, 4, (k, 8), dtype=np.uint8)
        tags = rng.integers(0, 2, (k, TAG), dtype=np.uint8)
        for j in range(k):  # rows scored before, some with the same inputs
            if history["bits"].size and rng.random() < 0.6:
                i = rng.integers(0, history["bits"].size)
                keys[j] = history["keys"][i]
                if rng.random() < 0.5:
                    tags[j] = history["tags"][i]
        now += float(rng.choice([1.0, 5_000.0, 40_000.0]))  # some entries pass out of the day
        requests = np.sort(rng.integers(0, 3, k))  # a micro-batch of up to 3 requests
        requests = np.unique(requests, return_inverse=True)[1].reshape(-1)
        expected_refused, expected_charged = _by_rule(history, batch, keys, tags, requests, 8, limit, now)
        summary, version = {}, state["version"]
        refused, why, record = online_ledger.charge_online(_Sealer(), SCOPE, state, keys, tags, 8, now, summary,
                                                           requests)
        assert refused.tolist() == expected_refused
        # refused or not, one record per batch, and the host's summary says only its version
        assert record and summary == {"version": version + 1} and state["version"] == version + 1
        assert ("over its budget of" in why) == any(expected_refused)
        assert np.array_equal(state["ledger"]["bits"][-k:], expected_charged)  # a refused row's carries no bits
        new = np.array(expected_charged) > 0
        for name, values in (("keys", keys), ("tags", tags), ("epochs", np.full(k, now)),
                             ("bits", np.array(expected_charged, dtype=np.int64))):
            history[name] = np.concatenate([history[name], values[new]])
        # the enclave holds every live charged entry (past ones may wait to be dropped, and a
        # repeat's entry is kept without bits)
        live = (state["ledger"]["epochs"] >= now - DAY_SECONDS) & (state["ledger"]["bits"] > 0)
        kept = (history["epochs"] >= now - DAY_SECONDS) & (history["bits"] > 0)
        for name in history:
            assert np.array_equal(state["ledger"][name][live], history[name][kept]), name


def test_the_memory_a_request_writes_does_not_show_whether_its_row_was_new():
    """A new customer and the same customer with the same inputs again (free): the ledger grows
    by the same entries, written to the same places (red team: only new rows were written, so a
    host watching its enclave's pages knew whether the customer was new today)."""
    rng = np.random.default_rng(3)
    now = 1e9
    start = _entries(rng, 3000, 8, now)
    start["epochs"][:] = now
    start["bits"][:] = 8
    writes = []
    for repeat in (False, True):
        state = {"ledger": {k: v.copy() for k, v in start.items()}, "batch": online_ledger.empty_ledger(),
                 "max_bits_per_row": 1000, "version": 1}
        online_ledger.charge_online(_Sealer(), SCOPE, state, start["keys"][:1], start["tags"][:1], 8, now, {})  # buffer
        used = state["ledger"]["bits"].size
        for values in state["ledger_buffer"].values():  # unwritten memory marked, so that every write shows
            values[used:].view(np.uint8)[...] = 0xA5
        before = {k: v.copy() for k, v in state["ledger_buffer"].items()}
        keys = start["keys"][1:2] if repeat else np.full((1, 8), 255, np.uint8)
        tags = start["tags"][1:2] if repeat else np.full((1, TAG), 255, np.uint8)
        summary = {}
        online_ledger.charge_online(_Sealer(), SCOPE, state, keys, tags, 8, now + 1, summary)
        changed = {k: np.flatnonzero(np.any((v.view(np.uint8) != before[k].view(np.uint8)).reshape(v.shape[0], -1),
                                            axis=1))  # compared as bytes (a marked float is a NaN)
                   for k, v in state["ledger_buffer"].items()}
        writes.append((state["ledger"]["bits"].size, {k: v.tolist() for k, v in changed.items()}))
    assert writes[0][0] == writes[1][0] == 3002
    assert writes[0][1]["epochs"] == writes[1][1]["epochs"] == [3001]  # the same entry, new or not


@pytest.mark.parametrize("told", [float("nan"), float("inf"), "soon", None])
def test_a_host_time_that_is_not_a_finite_number_is_refused(told):
    """The enclave has no clock: the host says the time. A NaN put every entry outside the day
    (red team: answers without end at a budget of two); it is refused, as is any non-number."""
    from teeboost.errors import ProtocolError
    from teeboost.protocols.strict.enclave.ledger import host_time

    with pytest.raises(ProtocolError, match="host's time"):
        host_time(told)
    assert host_time(1e9) == 1e9


_COMPILED = """
import json
import numpy as np
from teeboost.protocols.strict.enclave import online_ledger
class Sealer:
    def seal(self, data, context): return data
before = len(online_ledger._spending.signatures)
online_ledger.compile_spending()
after_load = len(online_ledger._spending.signatures)
rng = np.random.default_rng(0)
state = {"ledger": online_ledger.empty_ledger(), "batch": online_ledger.empty_ledger(), "max_bits_per_row": 10**6,
         "version": 1}
def decoded(values):  # as a message's arrays arrive: read-only
    values = values.copy()
    values.flags.writeable = False
    return values
state["batch"] = {k: decoded(np.zeros((2,) + v.shape[1:], v.dtype)) for k, v in state["batch"].items()}
for k in (1, 3, 20):
    keys = rng.integers(0, 255, (k, 8), dtype=np.uint8)
    tags = decoded(rng.integers(0, 255, (k, 16), dtype=np.uint8))
    online_ledger.charge_online(Sealer(), bytes(36), state, keys, tags, 8, 1e9, {})
print(json.dumps([before, after_load, len(online_ledger._spending.signatures)]))
"""


def test_the_comparison_kernel_is_compiled_before_the_first_request():
    """In a fresh process, as an enclave starts: the table load compiles it; requests of 1 to
    20 rows, with tags and a batch ledger as decoded from messages (read-only arrays, which
    numba compiles for separately), compile nothing more."""
    done = subprocess.run([sys.executable, "-c", _COMPILED], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, 1, 1]


def test_the_ledger_holds_the_windows_requests_and_no_more():
    """The same customers scored again and again with the same inputs (free each time but the
    first of each day), a request every 5 minutes for 5 days: every request writes an entry per
    row, charged or not, so the ledger holds the window's requests (which its host saw asked),
    and past entries are compacted away as they pile up."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 255, (20, 8), dtype=np.uint8)
    tags = rng.integers(0, 255, (20, TAG), dtype=np.uint8)
    state = {"ledger": online_ledger.empty_ledger(), "batch": online_ledger.empty_ledger(), "max_bits_per_row": 64,
             "version": 1}
    day = DAY_SECONDS // 300 * 20  # entries in a day's window
    sizes = []
    for step in range(1500):
        now = 1e9 + 300 * step
        refused, _, _ = online_ledger.charge_online(_Sealer(), SCOPE, state, keys, tags, 8, now, {})
        assert not refused.any()  # 8 bits each, once a day: every other score is the same answer again
        ledger = state["ledger"]
        live = ledger["epochs"] >= now - DAY_SECONDS
        assert np.count_nonzero(live) == min(20 * (step + 1), day + 20)
        assert int(ledger["bits"][live].sum()) == 20 * 8
        sizes.append(ledger["bits"].size)
    assert max(sizes) <= 2 * max(4096, day + 20) + 20 and sizes[-1] <= (day + 20) * 9 // 7


class _Opener(_Sealer):
    def unseal(self, data, context):
        return data


def test_a_log_ahead_of_the_hosts_recorded_version_is_replayed_and_one_behind_it_is_refused():
    """The host records a version only once the log is synced after it (``SealedLedgerFile``),
    so a log may end past it (a crash before the next sync): replayed, it counts every record.
    A log ending before it lost records the host had kept: refused, as is a broken chain."""
    from teeboost.errors import ProtocolError

    rng = np.random.default_rng(3)
    rt = _Opener()
    records = [online_ledger.seal_record(rt, SCOPE, v, v == 1, _entries(rng, 4, 8, 1e9)) for v in range(1, 8)]
    log = b"".join(len(r).to_bytes(4, "big") + r for r in records)
    for host_version in (1, 4, 7):
        ledger, last = online_ledger.replay_log(rt, SCOPE, log, host_version)
        assert last == 7
    with pytest.raises(ProtocolError, match="before the version the host last recorded"):
        online_ledger.replay_log(rt, SCOPE, log, 8)
    broken = b"".join(len(r).to_bytes(4, "big") + r for i, r in enumerate(records) if i != 3)
    with pytest.raises(ProtocolError, match="unbroken chain"):
        online_ledger.replay_log(rt, SCOPE, broken, 1)


def test_a_batch_session_counts_only_charged_online_answers_as_given():
    """The log holds refused and repeated requests' entries too (no bits): replayed for a batch
    session, their (row, inputs) are not an answer already given, so not free there."""
    rt = _Opener()
    key, tag, other = np.full((1, 8), 7, np.uint8), np.full((1, TAG), 1, np.uint8), np.full((1, TAG), 2, np.uint8)
    charged = {"keys": key, "tags": tag, "epochs": np.array([1e9]), "bits": np.array([8])}
    refused = {"keys": key, "tags": other, "epochs": np.array([1e9 + 1]), "bits": np.array([0])}
    records = [online_ledger.seal_record(rt, SCOPE, 1, True, charged), online_ledger.seal_record(rt, SCOPE, 2, False, refused)]
    log = b"".join(len(r).to_bytes(4, "big") + r for r in records)
    spent, seen = online_ledger.online_spending(rt, SCOPE, log, 2, 1e9 + 10)
    assert spent == {key.tobytes(): 8}
    assert seen == {key.tobytes() + tag.tobytes()}  # the refused inputs are not free in a batch


def test_one_customer_named_many_times_in_a_batch_spends_one_budget():
    """The same customer 64 times in one batch, with other inputs each time (a red team's
    batch: each row was compared with the ledger alone, and 512 bits left against a budget of
    16): the rows past the budget's request is refused; in a micro-batch of one request per
    row, the first two are scored and the rest refused."""
    key = np.full((64, 8), 9, np.uint8)
    tags = np.random.default_rng(0).integers(0, 255, (64, TAG), dtype=np.uint8)
    state = {"ledger": online_ledger.empty_ledger(), "batch": online_ledger.empty_ledger(), "max_bits_per_row": 16,
             "version": 1}
    refused, why, _ = online_ledger.charge_online(_Sealer(), SCOPE, state, key, tags, 8, 1e9, {})
    assert refused.all() and "over its budget of 16" in why and not state["ledger"]["bits"].any()
    refused, _, _ = online_ledger.charge_online(_Sealer(), SCOPE, state, key, tags, 8, 1e9 + 1, {}, np.arange(64))
    assert refused.tolist() == [False, False] + [True] * 62
    assert int(state["ledger"]["bits"].sum()) == 16


@pytest.mark.parametrize("n", [1, 20, 700])
def test_what_earlier_rows_of_a_key_charge_is_the_plain_sum(n):
    """The blocked comparison (512 rows at a time) against the sum written out plainly, across
    block boundaries."""
    rng = np.random.default_rng(n)
    asked = rng.integers(0, 40, n).astype(np.uint64)
    charged = rng.integers(0, 3, n).astype(np.int64) * 8
    plain = [sum(int(charged[i]) for i in range(j) if asked[i] == asked[j]) for j in range(n)]
    assert online_ledger._earlier_in_batch(asked, charged).tolist() == plain
