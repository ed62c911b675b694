"""The mistakes people make setting up N-TEE across hosts, repeated with real party processes:
each is named before any enclave starts, with the party, the [tee] field and the fix, at the
active party (exit code 2, no traceback) and on the passive party's stderr."""

import re
import subprocess
import sys

import pandas as pd
import pytest

from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.tee.key_files import public_key_of


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("federation")
    configs = write_federation(workdir, training={"n_trees": 1, "max_depth": 2})
    for name in ("active", "passive-1"):  # fewer rows: only the set-up is under test
        path = workdir / f"{name}.csv"
        pd.read_csv(path, dtype=str).head(1500).to_csv(path, index=False)
    keys = {name: {kind: public_key_of(workdir / f"{kind}-{name}.key")[1].hex() for kind in ("platform", "identity")}
            for name in ("active", "passive-1")}
    return workdir, configs, keys


def without_tee(text: str) -> str:
    return re.sub(r"\[tee\]\n(.*\n)*?\n", "", text)


def train(config, protocol="ntee"):
    result = run_cli("party", "--config", str(config), "--protocol", protocol)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def with_passive(workdir, configs, passive_text, name):
    """Start passive-1 from ``passive_text``; point the active party at it."""
    config = workdir / f"passive-1-{name}.toml"
    config.write_text(passive_text)
    process, address = start_passive(config, workdir / f"{name}.address", workdir / f"{name}.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    return process


def stop(process):
    process.terminate()  # stops cleanly on SIGTERM
    assert process.wait(timeout=30) == 0


def test_a_passive_party_without_tee_is_told_what_to_set_up(federation):
    workdir, configs, _ = federation
    process = with_passive(workdir, configs, without_tee(configs["passive-1"].read_text()), "no-tee")
    try:
        result = train(configs["active"])
    finally:
        stop(process)
    assert result.returncode == 2
    assert "party 'passive-1' (" in result.stderr and "has no [tee] section, and protocol 'ntee' runs on enclaves" \
        in result.stderr
    assert "`teeboost tee platform --out platform.key`" in result.stderr and "trusted_roots" in result.stderr
    assert "(its config file)" in result.stderr and "passive-1-no-tee.toml" not in result.stderr  # not its path
    log = (workdir / "no-tee.log").read_text()
    assert "WARNING" in log and "has no [tee] section, so it cannot serve" in log  # said at start-up
    assert "refused Setup: party 'passive-1'" in log and "Traceback" not in log


def test_a_platform_key_missing_from_trusted_roots_is_named(federation):
    workdir, configs, keys = federation
    active_root = keys["active"]["platform"]
    text = configs["passive-1"].read_text().replace(f'"{active_root}", ', "")
    assert active_root not in text
    process = with_passive(workdir, configs, text, "untrusted")
    try:
        result = train(configs["active"])
    finally:
        stop(process)
    assert result.returncode == 2
    assert (f"the quotes of the enclave of party 'active' are signed by platform {active_root}, which is not in "
            "[tee] trusted_roots of party 'passive-1': add it there") in result.stderr
    assert "`teeboost tee public-key platform.key`" in result.stderr


def test_mistakes_in_the_active_partys_own_tee(federation):
    """Against one correctly set-up passive party: the active party's [tee] missing, not
    accepting simulated enclaves, lacking the passive platform's key, or pinning a wrong
    identity for the passive party."""
    workdir, configs, keys = federation
    process = with_passive(workdir, configs, configs["passive-1"].read_text(), "good")
    good = configs["active"].read_text()  # now with the passive party's address
    try:
        configs["active"].write_text(without_tee(good))
        result = train(configs["active"])
        assert result.returncode == 2
        assert "party 'active' (" in result.stderr and "has no [tee] section" in result.stderr

        configs["active"].write_text(good.replace("allow_simulated = true\n", ""))
        result = train(configs["active"])
        assert result.returncode == 2 and "needs in [tee]: allow_simulated = true" in result.stderr

        passive_root = keys["passive-1"]["platform"]
        configs["active"].write_text(good.replace(f', "{passive_root}"', ""))
        result = train(configs["active"])
        assert result.returncode == 2
        assert (f"signed by platform {passive_root}, which is not in [tee] trusted_roots of party 'active'"
                in result.stderr)

        right, wrong = keys["passive-1"]["identity"], "ab" * 32
        configs["active"].write_text(good.replace(right, wrong))
        result = train(configs["active"])
        assert result.returncode == 2
        assert (f"[tee] identities[1] of party 'active' is {wrong}, but party 'passive-1' (index 1) has identity "
                f"key {right}: put that in identities[1] of party 'active'") in result.stderr

        configs["active"].write_text(good)  # and the right set-up trains
        result = train(configs["active"])
        assert result.returncode == 0, result.stderr
        assert "held-out auc" in result.stdout
    finally:
        configs["active"].write_text(good)
        stop(process)
    assert "Traceback" not in (workdir / "good.log").read_text()


def test_a_passive_party_that_was_re_keyed_says_so(federation):
    """passive-1 made a new identity key but kept the old public key in its identities."""
    workdir, configs, keys = federation
    rekeyed = workdir / "identity-rekeyed.key"
    new_key = run_cli("tee", "identity", "--out", str(rekeyed)).stdout.strip()
    text = configs["passive-1"].read_text().replace('identity = "identity-passive-1.key"',
                                                    'identity = "identity-rekeyed.key"')
    process = with_passive(workdir, configs, text, "rekeyed")
    try:
        result = train(configs["active"])
    finally:
        stop(process)
    assert result.returncode == 2
    assert (f"[tee] identities[1] is {keys['passive-1']['identity']}, but this party's identity key has public key "
            f"{new_key}") in result.stderr
