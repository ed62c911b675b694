"""Run by test_two_nodes.py in a process of its own: a two-node Ray cluster (two raylets
on this machine, one CPU and one object store each) trains SecureBoost and plain, and the
trees are compared with this process's local run. Prints one JSON line."""

from __future__ import annotations

import json

import numpy as np
import ray
from ray.cluster_utils import Cluster

from teeboost.compute import ComputeOptions, open_backend
from teeboost.compute.ray_backend import worker_node
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import split_columns
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.federation import train_local
from tests.helpers import federated_descriptions


def main() -> None:
    frame = load_give_me_some_credit().iloc[:1200]
    active, passives = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                                     id_column=GIVE_ME_SOME_CREDIT_ID)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 128 << 20})
    cluster.add_node(num_cpus=1, object_store_memory=128 << 20)
    cluster.wait_for_nodes()
    try:
        compute = ComputeOptions(backend="ray", address=cluster.address, shard_rows=1024)
        backend = open_backend(compute)
        nodes = set(backend.pool(2).map(worker_node, [0.2] * 8))
        same = {}
        params = BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32)
        for protocol, options in (("plain", ProtocolOptions()),
                                  ("secureboost", ProtocolOptions(key_bits=1024, insecure_key_bits=True))):
            local, _ = train_local(active, passives, params, protocol, options=options)
            clustered, run = train_local(active, passives, params, protocol, options=options, compute=compute)
            features = [p.features for p in passives]
            same[protocol] = (federated_descriptions(clustered) == federated_descriptions(local)
                              and np.array_equal(clustered.predict(active.features, features),
                                                 local.predict(active.features, features)))
        print(json.dumps({"describe": run.compute, "nodes_reached": len(nodes), "same": same}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
