"""Schemathesis against the running service's own ``/openapi.json``: generated requests, valid
and invalid (its examples, coverage and fuzzing phases, bounded), find no 5xx, every answer fits
the schema and its documented codes, and every 4xx names the field at fault
(``schemathesis_hooks.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("schemathesis")

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_headers_conformance",
          "response_schema_conformance", "negative_data_rejection", "unsupported_method", "allow_header_conformance",
          "errors_name_the_field")


def test_generated_requests_find_no_server_error_and_every_4xx_names_its_field(service, tmp_path):
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.serving.schemathesis_hooks",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("schemathesis")), "run", f"{service.url}/openapi.json",
         "--checks", ",".join(CHECKS), "--phases", "examples,coverage,fuzzing", "--max-examples", "40",
         "--workers", "1", "--seed", "34", "--generation-database", "none", "--request-timeout", "30", "--no-color"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert "No issues found" in result.stdout
    with service.client() as http:  # and the service is still well
        assert http.get("/healthz").status_code == 200
