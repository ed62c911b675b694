"""Real SGX and TDX quotes (Intel hardware, Intel-signed collateral) verified, and each kind of
bad quote refused with its own reason."""

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("dcap_qvl")

from teeboost.cli import main  # noqa: E402
from teeboost.errors import ConfigError  # noqa: E402
from teeboost.tee.dcap import DcapPolicy, DcapQuoteVerifier, Refused, SgxSigner, TdxMeasurement  # noqa: E402
from teeboost.tee.producers import hardware_report_data  # noqa: E402
from ..helpers import SMALL

SAMPLES = Path(__file__).parent / "samples"
INSIDE = datetime(2025, 7, 1, tzinfo=timezone.utc).timestamp()  # inside both collaterals' windows
AFTER = datetime(2025, 8, 1, tzinfo=timezone.utc).timestamp()
BEFORE = datetime(2025, 6, 1, tzinfo=timezone.utc).timestamp()
MRENCLAVE = bytes.fromhex("33d8736db756ed4997e04ba358d27833188f1932ff7b1d156904d3f560452fbb")
MRSIGNER = bytes.fromhex("815f42f11cf64430c30bab7816ba596a1da0130c3b028b673133a66cf9a3e0e6")
SGX_STATUS = "ConfigurationAndSWHardeningNeeded"
SGX_ADVISORIES = frozenset({"INTEL-SA-00289", "INTEL-SA-00615"})
HEADER = 48  # quote header; the report body follows


def sample(name):
    return (SAMPLES / name).read_bytes()


def collateral(name):
    return (SAMPLES / f"{name}_collateral.json").read_text()


def sgx_verifier(**policy):
    base = dict(accepted_statuses=frozenset({"UpToDate", SGX_STATUS}), accepted_advisories=SGX_ADVISORIES,
                mr_enclaves=frozenset({MRENCLAVE}))
    return DcapQuoteVerifier(DcapPolicy(**{**base, **policy}), collateral("sgx_quote"))


def tdx_mrtd():
    result = DcapQuoteVerifier(DcapPolicy(tdx=(TdxMeasurement(b"\0" * 48),)), collateral("tdx_quote"))
    with pytest.raises(Refused) as refused:
        result.inspect(sample("tdx_quote"), now=INSIDE)
    return bytes.fromhex(refused.value.result.measurements["mr_td"])


def test_the_sgx_sample_verifies_with_its_status_and_advisories():
    result = sgx_verifier().inspect(sample("sgx_quote"), now=INSIDE)
    assert result.tee == "sgx" and result.status == SGX_STATUS
    assert set(result.advisories) == SGX_ADVISORIES
    assert result.measurements["mr_enclave"] == MRENCLAVE.hex()
    assert result.report_data.startswith(b"Hello, world!") and result.report_data[13:] == b"\0" * 51


def test_the_tdx_sample_verifies_up_to_date():
    mrtd = tdx_mrtd()
    assert mrtd.hex().startswith("91eb2b44") and mrtd.hex().endswith("18b7")
    verifier = DcapQuoteVerifier(DcapPolicy(tdx=(TdxMeasurement(mrtd),)), collateral("tdx_quote"))
    result = verifier.inspect(sample("tdx_quote"), now=INSIDE)
    assert result.tee == "tdx" and result.status == "UpToDate" and result.advisories == []
    assert result.report_data.hex().startswith("9a9d48e7")


def test_the_default_policy_accepts_only_up_to_date_platforms():
    strict = DcapQuoteVerifier(DcapPolicy(mr_enclaves=frozenset({MRENCLAVE})), collateral("sgx_quote"))
    with pytest.raises(Refused) as refused:
        strict.inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "tcb-status" and SGX_STATUS in refused.value.detail
    status_only = sgx_verifier(accepted_advisories=frozenset({"INTEL-SA-00289"}))
    with pytest.raises(Refused) as refused:  # the status is accepted, one advisory is not
        status_only.inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "tcb-status" and "INTEL-SA-00615" in refused.value.detail
    with pytest.raises(ConfigError, match="revoked"):
        DcapPolicy(accepted_statuses=frozenset({"Revoked"}))
    with pytest.raises(ConfigError, match="not Intel statuses"):
        DcapPolicy(accepted_statuses=frozenset({"Fine"}))


@pytest.mark.parametrize("name", ["sgx_quote", "tdx_quote"])
@pytest.mark.parametrize("offset", [HEADER + 20, HEADER + 200, HEADER + 370])
def test_one_flipped_byte_of_a_report_body_is_refused(name, offset):
    quote = bytearray(sample(name))
    quote[offset] ^= 0x01
    verifier = sgx_verifier() if name == "sgx_quote" else DcapQuoteVerifier(
        DcapPolicy(tdx=(TdxMeasurement(tdx_mrtd()),)), collateral("tdx_quote"))
    with pytest.raises(Refused) as refused:
        verifier.inspect(bytes(quote), now=INSIDE)
    assert refused.value.reason == "quote-signature"


@pytest.mark.parametrize("now", [BEFORE, AFTER])
def test_a_time_outside_the_collateral_window_is_refused(now):
    with pytest.raises(Refused) as refused:
        sgx_verifier().inspect(sample("sgx_quote"), now=now)
    assert refused.value.reason == "collateral-window"


def test_a_measurement_not_on_the_allow_list_is_refused():
    with pytest.raises(Refused) as refused:
        sgx_verifier(mr_enclaves=frozenset({b"\1" * 32})).inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "measurement"
    signer = SgxSigner(MRSIGNER, isv_prod_id=0, min_isv_svn=0)
    assert sgx_verifier(mr_enclaves=frozenset(), signers=(signer,)).inspect(sample("sgx_quote"), now=INSIDE)
    newer = SgxSigner(MRSIGNER, isv_prod_id=0, min_isv_svn=1)  # the sample's ISVSVN is 0
    with pytest.raises(Refused) as refused:
        sgx_verifier(mr_enclaves=frozenset(), signers=(newer,)).inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "measurement"
    pinned = TdxMeasurement(tdx_mrtd(), (b"\2" * 48, None, None, None))  # RTMR0 pinned to another value
    with pytest.raises(Refused) as refused:
        DcapQuoteVerifier(DcapPolicy(tdx=(pinned,)), collateral("tdx_quote")).inspect(sample("tdx_quote"), now=INSIDE)
    assert refused.value.reason == "measurement"


def test_report_data_that_does_not_bind_the_channel_is_refused():
    """The channel asks for REPORTDATA = H(binding | nonce); the sample carries "Hello, world!"."""
    verifier = DcapQuoteVerifier(sgx_verifier().policy, collateral("sgx_quote"), clock=lambda: INSIDE)
    with pytest.raises(Refused) as refused:
        verifier.verify(sample("sgx_quote"), nonce=b"\0" * 32, report_data=b"binding")
    assert refused.value.reason == "report-data"
    expected = b"Hello, world!".ljust(64, b"\0")
    assert verifier.inspect(sample("sgx_quote"), expected_report_data=expected).status == SGX_STATUS
    assert hardware_report_data(b"binding", b"\0" * 32) != hardware_report_data(b"binding", b"\1" * 32)


def test_garbage_and_bad_collateral_are_refused_by_name():
    with pytest.raises(Refused) as refused:
        sgx_verifier().inspect(b"not a quote", now=INSIDE)
    assert refused.value.reason in ("quote-format", "quote-signature")
    broken = json.loads(collateral("sgx_quote"))
    del broken["tcb_info"]
    with pytest.raises(Refused) as refused:
        DcapQuoteVerifier(sgx_verifier().policy, json.dumps(broken)).inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "collateral"


def test_policy_from_config_table():
    policy = DcapPolicy.from_config({"accept_status": ["UpToDate", SGX_STATUS],
                                     "accept_advisories": sorted(SGX_ADVISORIES),
                                     "mrsigner": [{"mrsigner": MRSIGNER.hex(), "isv_prod_id": 0, "min_isv_svn": 0}]})
    assert DcapQuoteVerifier(policy, collateral("sgx_quote")).inspect(sample("sgx_quote"), now=INSIDE)
    with pytest.raises(ConfigError, match="must be 32 bytes"):
        DcapPolicy.from_config({"mrenclave": ["abcd"]})


@pytest.mark.parametrize("table, message", [
    ({"tdx": [{"mrtd": "00" * 48, "rtmr_1": "00" * 48}]}, "unknown field"),  # a misspelt pin must not vanish
    ({"tdx": [{"mrtd": "00" * 48, "rtmr0": "00" * 48}]}, "RTMR1-3"),  # firmware only: any workload would pass
    ({"mrsigner": [{"mrsigner": "00" * 32, "isv_prod_id": 0}]}, "needs 'min_isv_svn'"),  # no silent rollback
    ({"mrsigner": [{"mrsigner": "00" * 32, "isv_prod_id": 0, "min_isvsvn": 5}]}, "unknown field"),
    ({"mrsigner": [{"mrsigner": "00" * 32, "isv_prod_id": True, "min_isv_svn": 0}]}, "from 0 to 65535"),
    ({"mrsigner": [{"mrsigner": "00" * 32, "isv_prod_id": 0, "min_isv_svn": -1}]}, "from 0 to 65535"),
    ({"accept_advisories": "INTEL-SA-00289"}, "list of strings"),
    ({"mrsigner": "x"}, "list of tables"),
    ({"accept_stauts": ["UpToDate"]}, "unknown field"),
    ({"min_tcb_evaluation_data_number": "17"}, "whole number"),
])
def test_a_policy_that_would_accept_more_than_it_says_is_refused(table, message):
    with pytest.raises(ConfigError, match=message):
        DcapPolicy.from_config(table)


def test_collateral_older_than_the_policy_minimum_is_refused():
    policy = dataclasses.replace(sgx_verifier().policy, min_tcb_evaluation_data_number=18)  # the sample's is 17
    with pytest.raises(Refused) as refused:
        DcapQuoteVerifier(policy, collateral("sgx_quote")).inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "collateral" and "evaluation data number 17" in refused.value.detail


@pytest.mark.parametrize("edit", [
    lambda c: c.update(tcb_info=json.dumps({**json.loads(c["tcb_info"]), "issueDate": "2025-06-19"})),
    lambda c: c.update(tcb_info=json.dumps({**json.loads(c["tcb_info"]), "nextUpdate": None})),
    lambda c: c.update(qe_identity=json.dumps({**json.loads(c["qe_identity"]), "issueDate": 5})),
])
def test_malformed_collateral_dates_are_a_named_refusal_not_a_crash(edit):
    broken = json.loads(collateral("sgx_quote"))
    edit(broken)
    with pytest.raises(Refused) as refused:
        DcapQuoteVerifier(sgx_verifier().policy, json.dumps(broken)).inspect(bytearray(sample("sgx_quote")),
                                                                             now=INSIDE)
    assert refused.value.reason == "collateral"


def test_the_other_kind_of_collateral_is_blamed_on_the_collateral():
    with pytest.raises(Refused) as refused:
        DcapQuoteVerifier(sgx_verifier().policy, collateral("tdx_quote")).inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason in ("collateral", "collateral-window")


def test_cli_verifies_and_refuses_with_reasons(tmp_path, capsys):
    quote = str(SAMPLES / "tdx_quote")
    base = ["attestation", "verify", quote, "--collateral", str(SAMPLES / "tdx_quote_collateral.json"),
            "--now", str(INSIDE), "--json"]
    assert main(base) == 1  # no allow-list: nothing is accepted, but the quote's measurements are shown
    out = json.loads(capsys.readouterr().out)
    assert out["reason"] == "measurement" and out["measurements"]["mr_td"] == tdx_mrtd().hex()
    rtmrs = [f"{i}={out['measurements'][f'rtmr{i}']}" for i in (1, 2, 3)]
    assert main(base + ["--mrtd", tdx_mrtd().hex()]) == 2  # RTMR1-3 (kernel, workload) must be pinned
    assert "RTMR1-3" in capsys.readouterr().err
    pinned = base + ["--mrtd", tdx_mrtd().hex()] + [arg for r in rtmrs for arg in ("--rtmr", r)]
    assert main(pinned) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] and out["tee"] == "tdx" and out["tcb_status"] == "UpToDate"
    assert main(base + ["--mrtd", tdx_mrtd().hex(), "--rtmr", "1=" + "00" * 48, "--rtmr", "2=" + "00" * 48,
                        "--rtmr", "3=" + "00" * 48]) == 1
    assert json.loads(capsys.readouterr().out)["reason"] == "measurement"
    assert main(base + ["--mrtd", tdx_mrtd().hex(), "--allow-unpinned-rtmrs"]) == 0
    capsys.readouterr()
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[attestation]\naccept_status = ["UpToDate", "{SGX_STATUS}"]\n'
                      f'accept_advisories = {json.dumps(sorted(SGX_ADVISORIES))}\nmrenclave = ["{MRENCLAVE.hex()}"]\n')
    sgx = ["attestation", "verify", str(SAMPLES / "sgx_quote"), "--collateral",
           str(SAMPLES / "sgx_quote_collateral.json"), "--policy", str(policy)]
    assert main(sgx + ["--now", str(INSIDE)]) == 0
    assert "TCB status ConfigurationAndSWHardeningNeeded" in capsys.readouterr().out
    assert main(sgx + ["--now", str(AFTER)]) == 1
    assert "REFUSED (collateral-window)" in capsys.readouterr().out
    assert main(sgx + ["--now", str(INSIDE), "--report-data", "00" * 64]) == 1
    assert "REFUSED (report-data)" in capsys.readouterr().out
    assert main(sgx + ["--now", str(INSIDE), "--report-data", "00" * 13]) == 2  # never silently zero-padded
    assert "exactly 64 bytes" in capsys.readouterr().err
    assert main(sgx + ["--now", "nan"]) == 1
    assert "REFUSED (collateral-window)" in capsys.readouterr().out


def test_a_passive_party_configured_for_hardware_refuses_a_simulated_enclave(monkeypatch, small_credit):
    """1-TEE: the passive host checks the active enclave's quote. With an [attestation] policy
    it takes only Intel-signed quotes, so a simulated enclave (even an honest one) is refused."""
    import dataclasses

    from teeboost import federation
    from teeboost.config import BoostParams, ProtocolOptions
    from teeboost.errors import ProtocolError

    verifier = DcapQuoteVerifier(sgx_verifier().policy, collateral("sgx_quote"), clock=lambda: INSIDE)
    real = federation._environments

    def hardware_at_passives(*args, **kwargs):
        envs = real(*args, **kwargs)
        return envs[:1] + [dataclasses.replace(env, hardware_verifier=verifier) for env in envs[1:]]

    monkeypatch.setattr(federation, "_environments", hardware_at_passives)
    active, passives = small_credit
    with pytest.raises(ProtocolError) as refused:  # the passive party's refusal, as the active party hears it
        federation.train_local(active, passives, BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32), "onetee",
                               options=ProtocolOptions(allow_simulated_tee=True))
    assert "quote refused (quote-format)" in str(refused.value)


def test_attestation_table_in_a_party_config_builds_the_hardware_verifier(tmp_path):
    from teeboost.deploy.config import load_config, protocol_env

    (tmp_path / "collateral.json").write_text(collateral("sgx_quote"))
    config = tmp_path / "passive.toml"
    config.write_text('[party]\nname = "telco"\nrole = "passive"\nindex = 1\nlisten = "127.0.0.1:0"\n'
                      'data = "x.csv"\nid_column = "id"\n[tls]\ninsecure = true\n[attestation]\ncollateral = "collateral.json"\naccept_status = ["UpToDate"]\n'
                      f'mrenclave = ["{MRENCLAVE.hex()}"]\n')
    env = protocol_env(load_config(config))
    assert isinstance(env.hardware_verifier, DcapQuoteVerifier)
    with pytest.raises(Refused) as refused:  # the sample platform is not UpToDate: refused by this policy
        env.hardware_verifier.inspect(sample("sgx_quote"), now=INSIDE)
    assert refused.value.reason == "tcb-status"
    config.write_text(config.read_text().replace('collateral = "collateral.json"\n', ""))
    with pytest.raises(ConfigError, match="exactly one of collateral"):
        load_config(config)


def test_an_unreachable_pccs_is_a_named_refusal():
    verifier = DcapQuoteVerifier(sgx_verifier().policy, pccs_url="http://127.0.0.1:9/", clock=lambda: INSIDE)
    with pytest.raises(Refused) as refused:
        verifier.inspect(sample("sgx_quote"))
    assert refused.value.reason == "collateral" and "127.0.0.1:9" in refused.value.detail


def test_a_party_requiring_hardware_attestation_refuses_protocols_that_skip_it(tmp_path):
    """Otherwise the active party, the one to be checked, could name plain or N-TEE and never
    show a quote."""
    import numpy as np

    from teeboost.config import BoostParams
    from teeboost.deploy.config import load_config
    from teeboost.deploy.messages import Setup
    from teeboost.deploy.passive import PassiveService
    from teeboost.errors import ProtocolError

    (tmp_path / "collateral.json").write_text(collateral("sgx_quote"))
    (tmp_path / "x.csv").write_text("id,a\n" + "".join(f"{i},{i % 7}\n" for i in range(20)))
    config = tmp_path / "passive.toml"
    config.write_text('[party]\nname = "telco"\nrole = "passive"\nindex = 1\nlisten = "127.0.0.1:0"\n'
                      'data = "x.csv"\nid_column = "id"\n[tls]\ninsecure = true\n[attestation]\n'
                      f'collateral = "collateral.json"\nmrenclave = ["{MRENCLAVE.hex()}"]\n'
                      '[policy]\nprotocols = ["plain", "secureboost", "ntee", "onetee", "strict"]\n')
    service = PassiveService(load_config(config))
    service._aligned["train"] = service.data
    for protocol in ("plain", "secureboost", "ntee"):
        with pytest.raises(ProtocolError, match=f"refuses protocol '{protocol}'"):
            service.handle(Setup("run-1", protocol, json.dumps(BoostParams(min_samples_leaf=20, **SMALL).to_dict()), 1, np.arange(15),
                                 np.arange(15, 20), np.empty(0, dtype=np.int64)))
    config.write_text(config.read_text().replace('mrenclave = [', 'mrenclav = ['))
    with pytest.raises(ConfigError, match="unknown field"):  # a misspelt policy fails at load, not mid-run
        load_config(config)
