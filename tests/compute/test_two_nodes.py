"""A party's cluster of two nodes (two raylets, each with its own object store): jobs reach
both, shards stored by the driver are read on the other node, and the trees are unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]


def test_a_two_node_cluster_grows_the_same_trees():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "tests.compute.two_nodes_run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["nodes_reached"] == 2
    assert "2 CPUs on 2 nodes" in result["describe"]
    assert result["same"] == {"plain": True, "secureboost": True}
