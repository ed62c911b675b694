"""A party's [compute] settings: mistakes named with file and field, before any cluster is
reached; the settings stay with the party (nothing of them is in what it sends)."""

from __future__ import annotations

import pytest

from teeboost.compute import ComputeOptions, LocalBackend, open_backend
from teeboost.deploy.config import load_config
from teeboost.errors import ConfigError

from ..test_party_config import GOOD


@pytest.mark.parametrize("table, message", [
    ('backend = "spark"', "backend='spark' must be one of local, ray"),
    ('backend = "ray"\naddress = "http://head:8265"', "address='http://head:8265' must be 'local', 'auto'"),
    ('address = "auto"', "address='auto' needs backend='ray'"),
    ('backend = "ray"\nworkers = 0', "workers=0 must be an integer >= 1"),
    ('backend = "ray"\nshard_rows = 10', "shard_rows=10 must be an integer >= 1024"),
    ('backend = "ray"\naddress = "auto"\nnum_cpus = 4', "num_cpus and object_store_mb size a private Ray instance"),
    ('backend = "ray"\nnodes = 3', "[compute] has unknown field(s) nodes"),
    ('max_retries = -1', "max_retries=-1 must be an integer >= 0"),
], ids=["backend", "address", "address-without-ray", "workers", "shard-rows", "num-cpus-on-cluster", "unknown",
        "retries"])
def test_bad_compute_table_names_file_and_field(tmp_path, table, message):
    path = tmp_path / "passive.toml"
    path.write_text(GOOD + "\n[compute]\n" + table + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value) and "[compute]" in str(caught.value) and message in str(caught.value)


def test_compute_table_is_read_and_defaults_to_local_processes(tmp_path):
    path = tmp_path / "passive.toml"
    path.write_text(GOOD)
    assert load_config(path).compute == ComputeOptions()
    path.write_text(GOOD + '\n[compute]\nbackend = "ray"\naddress = "ray://head.bank.internal:10001"\n'
                           "workers = 64\nshard_rows = 65536\n")
    assert load_config(path).compute == ComputeOptions(backend="ray", address="ray://head.bank.internal:10001",
                                                       workers=64, shard_rows=65536)
    assert isinstance(open_backend(ComputeOptions()), LocalBackend)


def test_ray_backend_without_ray_installed_says_how_to_get_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ConfigError, match=r"pip install 'teeboost\[ray\]'"):
        open_backend(ComputeOptions(backend="ray"))


def test_cli_refuses_a_ray_address_without_ray(tmp_path, capsys):
    from teeboost.cli import main

    assert main(["train", "--ray-address", "auto", "--model-dir", str(tmp_path / "m")]) != 0
    assert "--ray-address auto needs --compute ray" in capsys.readouterr().err
