"""N-TEE enclave program: runs in every party's enclave (role chosen at init).

Active role: builds every message to the passive enclaves itself (gradients from the host's
values, level requests from partitions it checked: ``CheckedTree``), computes its own party's
gains from the host's claimed left sums, compares them with the passive enclaves' scores and
releases only the winner, an opaque handle and the winning gain.
Passive role: holds its party's binned columns, receives gradients and instance sets only
through the channel, finds its best split per node, and returns a score, a random handle and
the split's left sums (so the active enclave can check the partition later); it resolves a
handle into (feature, bin) only for its own host, and only if that split won.
Every channel is set up once per run with a party whose pinned identity key signed it.
"""

import json
import os

import numpy as np

from teeboost.core.constraints import PathColumns
from teeboost.core.gradients import GradientCodec
from teeboost.core.histogram import HistogramBuilder
from teeboost.core.nodes import NodeRows
from teeboost.core.packed import PackedInts
from teeboost.core.split import MAX_CATEGORY_BINS, best_splits, bins_fit_counts, goes_left, left_sums, sampled_features
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave import messages as m
from teeboost.protocols.enclave.handshake import ecall_confirm, ecall_finish_initiator, ecall_finish_responder, ecall_hello, ecall_respond, init_session  # noqa: F401 - entry points
from teeboost.protocols.enclave.handshake import expect as _expect
from teeboost.protocols.enclave.handshake import role as _role
from teeboost.protocols.enclave.session import session
from teeboost.protocols.enclave.limits import (CheckedLimits, check_holders, held_names, party_constraints_of,
                                               scoring_limits, winner_constraints)
from teeboost.protocols.enclave.tree import CheckedTree
from teeboost.protocols.enclave.partition import HistogramRequest, apply_announcements, bit_chunks, decode_row_sets, masks_to_bits
from teeboost.transport import serde

PROTOCOL = "ntee"


def ecall_init(rt, payload):
    init_session(rt, payload, PROTOCOL)
    return b""


# ---- active role

def _seal_all(current, frames):
    return m.pack_records({p: current.channel(p).seal(frame) for p, frame in frames.items()})


def ecall_own_names(rt, payload):
    """The active party's column names (under constraints): which constrained names it holds."""
    current = _role(rt, "active")
    names = bytes(payload).decode()
    rt.state["own_held"] = held_names(current.constraints, names)
    own = current.constraints.for_party(json.loads(names))
    rt.state["own_classes"] = set(zip(own.directions.tolist(), own.membership.tolist()))
    return b""


def _check_holders(rt, current, theirs: dict) -> None:
    """Once per run, before any constrained choice: every constrained name held exactly once."""
    if not current.constraints.any or rt.state.get("holders_checked"):
        return
    if "own_held" not in rt.state:
        raise ProtocolError("the active host did not name its own columns (the run has constraints)")
    held = {0: rt.state["own_held"]}
    for party, candidates in theirs.items():
        try:
            held[party] = json.loads(candidates.held)
        except ValueError:
            raise ProtocolError(f"party {party} sent unreadable column names") from None
    check_holders(current.constraints, held)
    rt.state["holders_checked"] = True


def ecall_gradients(rt, payload):
    """This tree's gradients (from the host, which owns the labels) -> one sealed record per
    passive enclave."""
    current = _role(rt, "active")
    current.require_all_peers()
    msg = _expect(payload, m.TreeGradients)
    rt.state["tree"] = None  # the last tree's arrays go before this one's arrive
    rt.state["tree"] = CheckedTree.from_message(msg, current.criteria, with_rows=False)  # only g, h per node
    if current.constraints.any:
        rt.state["tree"].limits = CheckedLimits(current.criteria, len(current.constraints.interaction))
        rt.state["tree"].limits.own_classes = rt.state.get("own_classes", set())
    # the passive enclaves get the very bytes this tree was built from, sealed
    return m.record_parts({p: current.channel(p).seal(payload) for p in current.peers})


def _tree(rt):
    tree = rt.state.get("tree")
    if tree is None:
        raise ProtocolError("no tree is open")
    return tree


def ecall_level(rt, payload):
    """Checked partitions and this level's nodes -> each passive enclave's level request
    (announcing the splits it did not own itself)."""
    current = _role(rt, "active")
    msg = _expect(payload, m.LevelIn)
    tree = _tree(rt)
    owners = dict(rt.state.get("owners", {}))
    sizes = [tree.size(int(node)) for node in msg.split_nodes]
    tree.begin_level(msg.tree, msg.nodes, msg.split_nodes, msg.split_lefts, msg.split_rights, msg.split_bits,
                     msg.bounds, msg.sets)
    chunks = bit_chunks(sizes, msg.split_bits)  # each partition's bits, checked by begin_level
    frames = {}
    for party in current.peers:
        keep = [i for i, node in enumerate(msg.split_nodes) if owners.get(int(node)) != party]
        frames[party] = serde.encode(HistogramRequest(
            msg.tree, msg.nodes.astype(np.int32), msg.split_nodes[keep].astype(np.int32),
            msg.split_lefts[keep].astype(np.int32), msg.split_rights[keep].astype(np.int32),
            np.concatenate([chunks[i] for i in keep]) if keep else np.empty(0, dtype=np.uint8),
            msg.bounds, msg.sets))
    return _seal_all(current, frames)


def ecall_choose(rt, payload):
    current = _role(rt, "active")
    msg = _expect(payload, m.CandidatesIn)
    tree = _tree(rt)
    if msg.tree != tree.tree or [int(n) for n in msg.nodes] != tree.level:
        raise ProtocolError("candidates for another level")
    own = tree.own_candidates(msg.own_valid, msg.own_left, msg.own_directions)
    n = len(own)
    constrained = {}  # (party, node index) -> the candidate column's (direction, interaction sets)
    candidates = [[(0, best, msg.own_left[i], None)] for i, best in enumerate(own)]
    handles = {}
    records = m.unpack_records(msg.records.tobytes())
    if sorted(records) != current.peers:
        raise ProtocolError("candidates must come from every passive party")
    opened = {party: _expect(current.channel(party).open(record), m.Candidates) for party, record in records.items()}
    _check_holders(rt, current, opened)
    for party, theirs in opened.items():
        if theirs.tree != msg.tree or theirs.gains.size != n or theirs.handles.size != n \
                or theirs.left_sums.shape != (n, 3) or theirs.left_digests.shape != (n, 32):
            raise ProtocolError(f"party {party} sent candidates for another level")
        if theirs.directions.size not in (0, n) or theirs.memberships.size != theirs.directions.size:
            raise ProtocolError(f"party {party} sent candidates' constraints for another level")
        for i in range(n):
            direction = int(theirs.directions[i]) if theirs.directions.size else 0
            if direction not in (-1, 0, 1):
                raise ProtocolError(f"party {party} sent a monotone direction of {direction}")
            if theirs.directions.size:
                constrained[(party, i)] = (direction, int(theirs.memberships[i]))
            best = tree.check_gain(party, i, float(theirs.gains[i]), theirs.left_sums[i], direction)
            candidates[i].append((party, best, theirs.left_sums[i], theirs.left_digests[i].tobytes()))
            handles[(party, i)] = int(theirs.handles[i])
    parties, gains = tree.choose(candidates)
    chosen_handles = np.array([handles.get((int(p), i), 0) for i, p in enumerate(parties)], dtype=np.uint64)
    rt.state["owners"] = {tree.level[i]: int(p) for i, p in enumerate(parties) if p >= 0}
    if tree.limits is not None:
        own_directions = msg.own_directions if msg.own_directions.size else np.zeros(n, dtype=np.int8)
        tree.limits.note_classes({tree.level[i]: constrained.get((int(p), i), (0, 0)) if p > 0
                                  else (int(own_directions[i]), None) for i, p in enumerate(parties) if p >= 0})
    if not constrained:
        return serde.encode(m.Chosen(parties, chosen_handles, gains))
    won = [constrained.get((int(p), i), (0, 0)) for i, p in enumerate(parties)]
    return serde.encode(m.Chosen(parties, chosen_handles, gains, np.array([w[0] for w in won], dtype=np.int8),
                                 np.array([w[1] for w in won], dtype=np.int64)))


# ---- passive role

def ecall_columns(rt, payload):
    """This party's own binned columns, once per enclave."""
    current = _role(rt, "passive")
    if "binned" in rt.state:
        raise ProtocolError("the columns were already loaded")
    cols = _expect(payload, m.EnclaveColumns)
    binned = np.ascontiguousarray(cols.binned)
    if cols.n_value_bins.size != binned.shape[0] or binned.size and binned.max() > current.max_bin \
            or np.any(cols.n_value_bins < 1) or np.any(cols.n_value_bins > current.max_bin) \
            or cols.categorical.shape != cols.n_value_bins.shape \
            or np.any(cols.categorical & (cols.n_value_bins > MAX_CATEGORY_BINS)) \
            or not bins_fit_counts(binned, cols.n_value_bins, current.max_bin):
        raise ProtocolError("binned columns do not match their bin counts")
    binned = binned.astype(np.uint8 if current.max_bin <= 255 else np.uint16)  # the bins' own size, not the wire's
    constraints = party_constraints_of(current.constraints, cols.names, binned.shape[0])
    held = held_names(current.constraints, cols.names) if constraints is not None else []
    rt.state.update(n_value_bins=cols.n_value_bins.copy(), categorical=cols.categorical.copy(), binned=binned,
                    builder=HistogramBuilder(binned, current.max_bin + 1), constraints=constraints, held=held,
                    paths=PathColumns())
    return b""


def ecall_gradients_record(rt, record):
    current = _role(rt, "passive")
    rt.state["builder"].end_tree()  # the last tree's arrays go before this one's arrive
    rt.state["nodes"] = None
    msg = _expect(current.channel(0).open_in_place(record), m.TreeGradients)  # the values stay in ``record``
    n_rows = rt.state["binned"].shape[1]
    if msg.n_rows != n_rows:
        raise ProtocolError(f"gradients for {msg.n_rows} rows; this party holds {n_rows}")
    (rows,) = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, n_rows, "gradient rows")
    nodes = NodeRows(n_rows, in_place=True)  # each node's g and h travel with its rows, packed as they arrived
    nodes.set_root(rows, (PackedInts.from_buffer(msg.g, msg.width_g, rows.size),
                          PackedInts.from_buffer(msg.h, msg.width_h, rows.size)))
    rt.state.update(tree=msg.tree, codec=GradientCodec(msg.frac_bits), nodes=nodes, handles={})
    rt.state["paths"].reset()
    rt.state["builder"].begin_tree(None)
    return b""


ecall_gradients_record.payload_in_buffer = True


def ecall_level_record(rt, record):
    current = _role(rt, "passive")
    msg = _expect(current.channel(0).open(record), HistogramRequest)
    if msg.tree != rt.state.get("tree"):
        raise ProtocolError(f"level request for tree {msg.tree}, but tree {rt.state.get('tree')} is open")
    nodes = rt.state["nodes"]
    apply_announcements(nodes, msg)
    for node, left_id, right_id in zip(msg.split_nodes, msg.split_lefts, msg.split_rights):  # others' splits
        rt.state["paths"].split(int(node), int(left_id), int(right_id))
    requested = [int(n) for n in msg.nodes]
    hist = rt.state["builder"].level(requested, nodes)
    sampled = sampled_features(current.criteria, current.party, msg.tree, rt.state["n_value_bins"].size)
    best = best_splits(hist, rt.state["n_value_bins"], rt.state["codec"], current.criteria, rt.state["categorical"],
                       sampled, **scoring_limits(rt.state["constraints"], rt.state["paths"].of(requested), msg.bounds,
                                                 msg.sets))
    handles = {}
    handle_array = np.zeros(len(requested), dtype=np.uint64)
    sums = np.zeros((len(requested), 3), dtype=np.int64)
    digests = np.zeros((len(requested), 32), dtype=np.uint8)
    for i, (node, candidate) in enumerate(zip(requested, best)):
        handle = int.from_bytes(os.urandom(8), "big") | 1
        handles[handle] = (node, candidate)
        handle_array[i] = handle
        if candidate.valid:
            sums[i] = left_sums(hist[i, candidate.feature], candidate.bin, candidate.default_left,
                                bool(rt.state["categorical"][candidate.feature]))
            digests[i] = np.frombuffer(m.partition_digest(np.packbits(_goes_left(rt, node, candidate))), dtype=np.uint8)
    rt.state["handles"] = handles
    gains = np.array([c.gain for c in best], dtype=np.float64)
    return current.channel(0).seal(serde.encode(m.Candidates(msg.tree, gains, handle_array, sums, digests,
                                                             **winner_constraints(rt.state["constraints"], best),
                                                             held=json.dumps(rt.state["held"]))))


def _goes_left(rt, node, candidate):
    """Which rows of ``node`` the candidate sends left (a boolean over the node's rows)."""
    column = rt.state["binned"][candidate.feature, rt.state["nodes"].rows(int(node))]
    return goes_left(column, candidate.bin, candidate.default_left, bool(rt.state["categorical"][candidate.feature]),
                     session(rt).max_bin)


def ecall_apply(rt, payload):
    _role(rt, "passive")
    msg = _expect(payload, m.ApplyIn)
    if msg.tree != rt.state.get("tree"):
        raise ProtocolError("split request for a tree that is not open")
    nodes = rt.state["nodes"]
    features, bins, directions, masks = [], [], [], []
    for node, left_id, right_id, handle in zip(msg.nodes, msg.lefts, msg.rights, msg.handles):
        entry = rt.state["handles"].pop(int(handle), None)
        if entry is None or entry[0] != int(node) or not entry[1].valid:
            raise ProtocolError("unknown or already used split handle")
        candidate = entry[1]
        went_left = _goes_left(rt, node, candidate)
        nodes.split_mask(int(node), int(left_id), int(right_id), went_left)
        rt.state["paths"].split(int(node), int(left_id), int(right_id), candidate.feature)
        features.append(candidate.feature)
        bins.append(candidate.bin)
        directions.append(candidate.default_left)
        masks.append(went_left)
    return serde.encode(m.Applied(np.array(features, dtype=np.int32), np.array(bins, dtype=np.int64),
                                  np.array(directions, dtype=bool), masks_to_bits(masks)))
