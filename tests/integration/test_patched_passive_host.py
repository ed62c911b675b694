"""A passive host that patches its own host code, against strict mode's sealed records (issue
#32, red-team findings). Real processes: the passive party is the stock ``teeboost party``
server with one patch applied by a wrapper script, as its operator could; the label owner runs
the stock CLI.

- Error oracle: in each prediction session the host hands its enclave rows cut down to K
  columns. The enclave used to answer "record <id> names feature <f>; the rows have K", which
  told the host which of its columns won splits without any consent. Now every such session
  fails with one fixed message, and no record id or feature reaches the host.
- Answer size: the sealed record bits a passive host relays to the active enclave at prediction
  had one row per record this party won, so their length told the host how many splits its
  columns won. Now the answer has one row per position the run decided, whatever the data.
- Column cap: the label owner's ``max_passive_features`` was checked against the count the
  passive host reports in its Hello; a host that reports one column brought five. Now every
  passive enclave counts its own columns against the cap the active enclave sends it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from teeboost.deploy.demo import set_peer_addresses, write_federation

from ..helpers import stop_passive_parties

ORACLE_PATCH = '''
import json, sys
from pathlib import Path
import numpy as np
from teeboost.protocols.strict import hosts

K_FILE, LOG = Path(sys.argv.pop(1)), Path(sys.argv.pop(1))
honest = hosts.StrictPredictPassive._session


def narrowed(self, name, request, raw, keys):
    if not K_FILE.exists():
        return honest(self, name, request, raw, keys)
    k = int(K_FILE.read_text())
    try:
        honest(self, name, request, np.ascontiguousarray(raw[:, :k]), keys)
        said = "no error"
    except Exception as exc:
        said = str(exc)
    with LOG.open("a") as handle:
        handle.write(json.dumps({"k": k, "said": said}) + "\\n")
    raise hosts.ProtocolError("session failed")


hosts.StrictPredictPassive._session = narrowed
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''

HELLO_PATCH = '''
import sys
from teeboost.parties import passive

honest = passive.PassiveParty._hello


def one_column(self, msg):
    reply = honest(self, msg)
    return type(reply)(reply.name, reply.n_rows, reply.n_value_bins[:1], reply.categorical[:1])


passive.PassiveParty._hello = one_column
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


SIZE_PATCH = '''
import sys
from pathlib import Path
from teeboost.protocols.strict import hosts

LOG = Path(sys.argv.pop(1))
honest = hosts.StrictPredictPassive._session


def measured(self, name, request, raw, keys):
    answer = honest(self, name, request, raw, keys)
    with LOG.open("a") as handle:
        handle.write(f"{len(answer)}\\n")
    return answer


hosts.StrictPredictPassive._session = measured
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def patched_federation(workdir, patch: str, *patch_args, active_policy: str = ""):
    configs = write_federation(workdir, n_passive=1, training={"n_trees": 4, "max_depth": 3}, rows=3000)
    if active_policy:
        configs["active"].write_text(configs["active"].read_text().replace("[policy]\n", f"[policy]\n{active_policy}\n",
                                                                           1))
    script = workdir / "patched_party.py"
    script.write_text(textwrap.dedent(patch))
    ready = workdir / "passive-1.address"
    process = subprocess.Popen([sys.executable, str(script), *map(str, patch_args), "party", "--config",
                                str(configs["passive-1"]), "--ready-file", str(ready)],
                               stdout=(workdir / "passive-1.log").open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, (workdir / "passive-1.log").read_text()
        time.sleep(0.1)
    set_peer_addresses(configs["active"], {1: ("passive-1", ready.read_text().strip())})
    return configs, process


@pytest.fixture
def oracle_host(tmp_path):
    k_file, log = tmp_path / "k.txt", tmp_path / "oracle.jsonl"
    configs, process = patched_federation(tmp_path, ORACLE_PATCH, k_file, log)
    yield tmp_path, configs, k_file, log
    stop_passive_parties(configs["active"], [process])


def test_a_patched_passive_host_learns_no_sealed_record_from_its_enclaves_errors(oracle_host):
    workdir, configs, k_file, log = oracle_host
    trained = cli("party", "--config", configs["active"], "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    import pandas as pd

    new = workdir / "new.csv"
    pd.read_csv(workdir / "active.csv", dtype={"id": str}).head(50).drop(columns=["SeriousDlqin2yrs"]) \
        .to_csv(new, index=False)
    for k in range(5):  # the passive party has 5 columns
        k_file.write_text(str(k))
        result = cli("predict", "--config", configs["active"], "--data", new, "--output", workdir / f"p{k}.csv")
        assert result.returncode != 0  # the host made each session fail; the label owner sees it
    said = [json.loads(line)["said"] for line in log.read_text().splitlines()]
    assert len(said) == 5
    # what the host's enclave said, the same whatever the sealed records hold
    assert all("do not have this party's columns" in s for s in said), said
    k_file.unlink()
    consent = workdir / "consent.json"
    assert cli("consent", "--config", configs["active"], "--party", "1", "--out", consent).returncode == 0
    assert cli("disclose", "--config", configs["passive-1"], "--consent", consent).returncode == 0
    records = json.loads((workdir / "model-passive-1" / "passive-1.json").read_text())["records"]
    assert records and not [r for r in records for s in said if str(r["id"]) in s]


def test_the_label_owners_column_cap_is_counted_by_the_passive_enclave_not_its_host(tmp_path):
    configs, process = patched_federation(tmp_path, HELLO_PATCH, active_policy="max_passive_features = 1")
    try:
        result = cli("party", "--config", configs["active"], "--protocol", "strict", "--json")
    finally:
        stop_passive_parties(configs["active"], [process])
    assert result.returncode != 0
    assert "max_passive_features" in result.stderr and "brings 5" in result.stderr, result.stderr
    assert not (tmp_path / "model-active" / "active.json").exists()


def test_the_sealed_answer_a_passive_host_relays_has_the_same_size_however_many_splits_it_won(tmp_path):
    import numpy as np
    import pandas as pd

    sizes, records = {}, {}
    for case in ("informative", "noise"):
        workdir = tmp_path / case
        workdir.mkdir()
        log = workdir / "sizes.log"
        configs, process = patched_federation(workdir, SIZE_PATCH, log)
        try:
            if case == "noise":  # the same file shape, columns that win (almost) no split
                data = pd.read_csv(workdir / "passive-1.csv", dtype={"id": str})
                rng = np.random.default_rng(0)
                for column in data.columns[1:]:
                    data[column] = rng.permutation(data[column].to_numpy())
                data.to_csv(workdir / "passive-1.csv", index=False)
            trained = cli("party", "--config", configs["active"], "--protocol", "strict", "--json")
            assert trained.returncode == 0, trained.stderr
            new = workdir / "new.csv"
            pd.read_csv(workdir / "active.csv", dtype={"id": str}).head(50).drop(columns=["SeriousDlqin2yrs"]) \
                .to_csv(new, index=False)
            predicted = cli("predict", "--config", configs["active"], "--data", new, "--output", workdir / "p.csv")
            assert predicted.returncode == 0, predicted.stderr
            consent = workdir / "consent.json"
            assert cli("consent", "--config", configs["active"], "--party", "1", "--out", consent).returncode == 0
            assert cli("disclose", "--config", configs["passive-1"], "--consent", consent).returncode == 0
        finally:
            stop_passive_parties(configs["active"], [process])
        sizes[case] = log.read_text().split()
        records[case] = len(json.loads((workdir / "model-passive-1" / "passive-1.json").read_text())["records"])
    assert records["informative"] != records["noise"], records  # the parties won different numbers of splits
    assert sizes["informative"] == sizes["noise"] and sizes["noise"], sizes  # held-out rows, then the 50 new ones
