"""N-TEE enclave program: runs in every party's enclave (role chosen at init).

Active role: seals the host's per-peer messages (gradients, level requests) into the attested
channels, and compares the passive enclaves' candidate scores with its own party's, releasing
only the winner, an opaque handle and the winning gain.
Passive role: holds its party's binned columns, receives gradients and instance sets only
through the channel, finds its best split per node, and returns a score with a random handle;
it resolves a handle into (feature, bin) only for its own host, and only if that split won.
"""

import os

import numpy as np

from teeboost.core.gradients import EncodedGradients, GradientCodec
from teeboost.core.histogram import HistogramBuilder
from teeboost.core.nodes import NodeRows
from teeboost.core.split import NodeBest, SplitCriteria, best_splits, pick_global_best
from teeboost.errors import ProtocolError
from teeboost.protocols import enclave_messages as m
from teeboost.protocols.intcodec import unpack_ints
from teeboost.protocols.partition import HistogramRequest, bits_to_subsets, decode_row_sets, subsets_to_bits
from teeboost.tee.channel import ChannelInitiator, ChannelResponder
from teeboost.tee.quote import QuoteVerifier
from teeboost.transport import serde


def _verifier(rt):
    roots = [bytes.fromhex(r) for r in rt.state["config"]["trusted_roots"]]
    return QuoteVerifier(roots, [rt.measurement])  # peers must run this very code


def _expect(frame, cls):
    msg = serde.decode(frame)
    if not isinstance(msg, cls):
        raise ProtocolError(f"expected {cls.__name__}, got {type(msg).__name__}")
    return msg


def _records(rt, items):
    """{party: plaintext frame} -> SealedRecords frame, each sealed into that party's channel."""
    return m.pack_records({p: rt.state["channels"][p].seal(frame) for p, frame in items.items()})


def _open_records(rt, frame):
    return {p: rt.state["channels"][p].open(record) for p, record in m.unpack_records(frame).items()
            if p in rt.state["channels"]}


def ecall_init(rt, payload):
    init = _expect(payload, m.EnclaveInit)
    if init.role not in ("active", "passive"):
        raise ProtocolError(f"unknown role {init.role!r}")
    rt.state.update(role=init.role, party=init.party, channels={}, max_bin=init.max_bin,
                    criteria=SplitCriteria(init.reg_lambda, init.min_child_weight, init.min_samples_leaf,
                                           init.min_split_gain))
    return b""


def _aes_bits(rt):
    return int(rt.state["config"].get("aes_bits", 128))


# ---- attested channels (active enclave initiates, passive enclaves respond; both attest)

def ecall_hello(rt, payload):
    peer = int.from_bytes(payload, "big")
    initiator = ChannelInitiator(verifier=_verifier(rt), attester=rt.quote, aes_bits=_aes_bits(rt))
    rt.state.setdefault("initiators", {})[peer] = initiator
    return initiator.hello()


def ecall_finish_initiator(rt, payload):
    peer = int.from_bytes(payload[:4], "big")
    final, channel = rt.state["initiators"].pop(peer).finish(payload[4:])
    rt.state["channels"][peer] = channel
    return final


def ecall_respond(rt, hello):
    rt.state["responder"] = ChannelResponder(attester=rt.quote, verifier=_verifier(rt), aes_bits=_aes_bits(rt))
    return rt.state["responder"].respond(hello)


def ecall_finish_responder(rt, final):
    rt.state["channels"][0] = rt.state.pop("responder").finish(final)
    return b""


# ---- active role

def ecall_seal_for(rt, payload):
    """The host's plaintext frames for each peer -> records only that peer's enclave opens."""
    return _records(rt, m.unpack_records(payload))


def ecall_choose(rt, payload):
    msg = _expect(payload, m.CandidatesIn)
    n = msg.nodes.size
    if msg.own_gains.size != n:
        raise ProtocolError("own candidates do not match the nodes")
    candidates = [[(0, NodeBest(float(g), -1, -1, False))] for g in msg.own_gains]
    handles = {}
    for party, frame in _open_records(rt, msg.records.tobytes()).items():
        theirs = _expect(frame, m.Candidates)
        if theirs.tree != msg.tree or theirs.gains.size != n or theirs.handles.size != n:
            raise ProtocolError(f"party {party} sent candidates for another level")
        for i in range(n):
            candidates[i].append((party, NodeBest(float(theirs.gains[i]), -1, -1, False)))
            handles[(party, i)] = int(theirs.handles[i])
    parties = np.full(n, -1, dtype=np.int32)
    chosen_handles = np.zeros(n, dtype=np.uint64)
    gains = np.zeros(n, dtype=np.float64)
    for i, node_candidates in enumerate(candidates):
        winner = pick_global_best(node_candidates)
        if winner is not None:
            parties[i], gains[i] = winner[0], winner[1].gain
            chosen_handles[i] = handles.get((winner[0], i), 0)
    return serde.encode(m.Chosen(parties, chosen_handles, gains))


# ---- passive role

def ecall_columns(rt, payload):
    cols = _expect(payload, m.EnclaveColumns)
    binned = np.ascontiguousarray(cols.binned)
    if cols.n_value_bins.size != binned.shape[0] or binned.size and binned.max() > rt.state["max_bin"]:
        raise ProtocolError("binned columns do not match their bin counts")
    rt.state.update(n_value_bins=cols.n_value_bins.copy(), binned=binned,
                    builder=HistogramBuilder(binned, rt.state["max_bin"] + 1))
    return b""


def ecall_gradients(rt, record):
    msg = _expect(rt.state["channels"][0].open(record), m.TreeGradients)
    n_rows = rt.state["binned"].shape[1]
    if msg.n_rows != n_rows:
        raise ProtocolError(f"gradients for {msg.n_rows} rows; this party holds {n_rows}")
    (rows,) = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, n_rows, "gradient rows")
    g = np.zeros(n_rows, dtype=np.int64)
    h = np.zeros(n_rows, dtype=np.int64)
    g[rows] = unpack_ints(msg.g, msg.width_g, rows.size)
    h[rows] = unpack_ints(msg.h, msg.width_h, rows.size)
    nodes = NodeRows(n_rows)
    nodes.set_root(rows)
    rt.state.update(tree=msg.tree, codec=GradientCodec(msg.frac_bits), nodes=nodes, handles={})
    rt.state["builder"].begin_tree(EncodedGradients(g, h, rt.state["codec"]))
    return b""


def ecall_level(rt, record):
    msg = _expect(rt.state["channels"][0].open(record), HistogramRequest)
    if msg.tree != rt.state["tree"]:
        raise ProtocolError(f"level request for tree {msg.tree}, but tree {rt.state['tree']} is open")
    nodes = rt.state["nodes"]
    parents = [nodes.rows(int(node)) for node in msg.split_nodes]
    for node, left, right, rows in zip(msg.split_nodes, msg.split_lefts, msg.split_rights,
                                       bits_to_subsets(parents, msg.split_bits, "split announcement")):
        nodes.split(int(node), int(left), int(right), rows)
    requested = [int(n) for n in msg.nodes]
    hist = rt.state["builder"].level(requested, nodes)
    best = best_splits(hist, rt.state["n_value_bins"], rt.state["codec"], rt.state["criteria"])
    handles = {}
    handle_array = np.zeros(len(requested), dtype=np.uint64)
    for i, (node, candidate) in enumerate(zip(requested, best)):
        handle = int.from_bytes(os.urandom(8), "big") | 1
        handles[handle] = (node, candidate)
        handle_array[i] = handle
    rt.state["handles"] = handles
    gains = np.array([c.gain for c in best], dtype=np.float64)
    return rt.state["channels"][0].seal(serde.encode(m.Candidates(msg.tree, gains, handle_array)))


def ecall_apply(rt, payload):
    msg = _expect(payload, m.ApplyIn)
    if msg.tree != rt.state["tree"]:
        raise ProtocolError("split request for a tree that is not open")
    nodes, binned = rt.state["nodes"], rt.state["binned"]
    features, bins, directions, parents, lefts = [], [], [], [], []
    for node, left_id, right_id, handle in zip(msg.nodes, msg.lefts, msg.rights, msg.handles):
        entry = rt.state["handles"].pop(int(handle), None)
        if entry is None or entry[0] != int(node) or not entry[1].valid:
            raise ProtocolError("unknown or already used split handle")
        candidate = entry[1]
        rows = nodes.rows(int(node))
        column = binned[candidate.feature, rows]
        go_left = column <= candidate.bin
        if candidate.default_left:
            go_left |= column == rt.state["max_bin"]
        left = rows[go_left]
        nodes.split(int(node), int(left_id), int(right_id), left)
        features.append(candidate.feature)
        bins.append(candidate.bin)
        directions.append(candidate.default_left)
        parents.append(rows)
        lefts.append(left)
    return serde.encode(m.Applied(np.array(features, dtype=np.int32), np.array(bins, dtype=np.int32),
                                  np.array(directions, dtype=bool), subsets_to_bits(parents, lefts)))
