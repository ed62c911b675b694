"""1-TEE enclave program: the only enclave, at the active party.

It draws a fresh uniform one-time pad in Z_2^64 for every sampled row's fixed-point g and h,
so masked values reveal nothing to passive parties. Passive parties sum masked values per bin
(exact wrap-around arithmetic) and send the sums, sealed to this enclave, with the index sets
that produced them (or their bin assignments once). The enclave subtracts the pads of each
index set, checks every bin sum against the true gradients it holds, derives sibling nodes,
scores every split of every party and releases only the winner per node: to its host the
winning party and gain, to the winning passive party (sealed) its feature and bin.
"""

import os

import numpy as np

from teeboost.core.gradients import GradientCodec
from teeboost.core.split import NodeBest, SplitCriteria, best_splits, pick_global_best
from teeboost.errors import ProtocolError
from teeboost.protocols import enclave_messages as m
from teeboost.protocols.partition import decode_row_sets
from teeboost.protocols.ring import ring_bincount
from teeboost.tee.channel import ChannelResponder
from teeboost.transport import serde

def _expect(frame, cls):
    msg = serde.decode(frame)
    if not isinstance(msg, cls):
        raise ProtocolError(f"expected {cls.__name__}, got {type(msg).__name__}")
    return msg


def ecall_init(rt, payload):
    init = _expect(payload, m.EnclaveInit)
    rt.state.update(channels={}, responders={}, bins={}, n_value_bins={}, max_bin=init.max_bin,
                    criteria=SplitCriteria(init.reg_lambda, init.min_child_weight, init.min_samples_leaf,
                                           init.min_split_gain))
    return b""


def ecall_respond(rt, payload):
    """A passive party's host opens an attested channel to this enclave (it is not attested
    itself: parties are authenticated by mutual TLS)."""
    party = int.from_bytes(payload[:4], "big")
    responder = ChannelResponder(attester=rt.quote, aes_bits=int(rt.state["config"].get("aes_bits", 128)))
    rt.state["responders"][party] = responder
    return responder.respond(payload[4:])


def ecall_finish_responder(rt, payload):
    party = int.from_bytes(payload[:4], "big")
    rt.state["channels"][party] = rt.state["responders"].pop(party).finish(payload[4:])
    return b""


def ecall_bins_once(rt, payload):
    """A passive party's bin assignments (BinsOnce, sealed by that party)."""
    party = int.from_bytes(payload[:4], "big")
    msg = _expect(rt.state["channels"][party].open(payload[4:]), m.BinsOnce)
    reported = rt.state.get("reported_bins", {}).get(party)
    if reported is None or not np.array_equal(msg.n_value_bins, reported) or msg.binned.shape[0] != reported.size:
        raise ProtocolError(f"party {party} sent bin assignments for other features than its handshake reported")
    for f, n_bins in enumerate(reported):  # a value bin beyond the feature's count, or past max_bin
        column = msg.binned[f]
        if column.size and column.max() > rt.state["max_bin"] or np.any((column >= n_bins) & (column != rt.state["max_bin"])):
            raise ProtocolError(f"party {party} sent out-of-range bins for feature {f}")
    rt.state["bins"][party] = np.ascontiguousarray(msg.binned)
    rt.state["n_value_bins"][party] = msg.n_value_bins.copy()
    return b""


def _checkpoint_context(run_id: bytes) -> bytes:
    return b"teeboost-checkpoint/onetee/" + run_id


def ecall_checkpoint(rt, run_id):
    """Seal what only this enclave holds and a resumed run needs: the passive parties' bin
    assignments (bins-once). Sealed to this measurement and platform and bound to the run id,
    so the host can store the blob but neither read it nor feed it to another run."""
    records = {p: serde.encode(m.BinsOnce(rt.state["n_value_bins"][p], rt.state["bins"][p]))
               for p in sorted(rt.state["bins"])}
    return rt.seal(m.pack_records(records), _checkpoint_context(run_id))


def ecall_restore(rt, payload):
    """Unseal a checkpoint of this run (IntegrityError if it is another run's or altered)."""
    size = int.from_bytes(payload[:2], "big")
    run_id, blob = payload[2:2 + size], payload[2 + size:]
    records = m.unpack_records(rt.unseal(blob, _checkpoint_context(run_id)))
    for party, frame in records.items():
        msg = _expect(frame, m.BinsOnce)
        rt.state["bins"][party] = np.ascontiguousarray(msg.binned)
        rt.state["n_value_bins"][party] = msg.n_value_bins.copy()
    return np.array(sorted(records), dtype=np.int64).tobytes()


def ecall_mask(rt, payload):
    """Host's gradients -> masked gradients; the pads never leave the enclave."""
    msg = _expect(payload, m.GradientsIn)
    n = msg.rows.size
    if msg.g.size != n or msg.h.size != n:
        raise ProtocolError("gradient vectors do not match the rows")
    pads = np.frombuffer(os.urandom(16 * n), dtype=np.uint64).reshape(2, n)
    g = np.zeros(msg.n_rows, dtype=np.int64)
    h = np.zeros(msg.n_rows, dtype=np.int64)
    g[msg.rows], h[msg.rows] = msg.g, msg.h
    pad_g = np.zeros(msg.n_rows, dtype=np.uint64)
    pad_h = np.zeros(msg.n_rows, dtype=np.uint64)
    pad_g[msg.rows], pad_h[msg.rows] = pads[0], pads[1]
    sampled = np.zeros(msg.n_rows, dtype=bool)
    sampled[msg.rows] = True
    rt.state.update(tree=msg.tree, codec=GradientCodec(msg.frac_bits), g=g, h=h, pad_g=pad_g, pad_h=pad_h,
                    sampled=sampled, cache={})
    return serde.encode(m.MaskedGradientsIn(msg.g.view(np.uint64) + pads[0], msg.h.view(np.uint64) + pads[1]))


def _unmask_index_sets(rt, party, msg, i, node_rows, width):
    """Built node i of ``msg``: (features, width, 3) exact sums from sums and index sets,
    which must name exactly the node's rows (no row of another node, none twice)."""
    n_features = msg.sums.shape[1]
    counts = msg.index_counts[i]
    per_feature = int(counts[0].sum())
    start = int(msg.index_counts[:i].sum())
    out = np.zeros((n_features, width, 3), dtype=np.int64)
    reference = None
    for f in range(n_features):
        if int(counts[f].sum()) != per_feature or np.any(counts[f] < 0):
            raise ProtocolError(f"party {party}: index sets of node {msg.built[i]} differ between features")
        rows = msg.index_rows[start + f * per_feature:start + (f + 1) * per_feature].astype(np.int64)
        if rows.size and (rows.max() >= rt.state["sampled"].size or not rt.state["sampled"][rows].all()):
            raise ProtocolError(f"party {party}: index sets name rows outside this tree's sample")
        ordered = np.sort(rows)
        if reference is None:
            if ordered.size > 1 and np.any(np.diff(ordered) == 0):
                raise ProtocolError(f"party {party}: index sets repeat rows")
            if not np.array_equal(ordered, np.sort(node_rows)):
                raise ProtocolError(f"party {party}: index sets of node {msg.built[i]} name rows that are not "
                                    "the node's rows")
            reference = ordered
        elif not np.array_equal(ordered, reference):
            raise ProtocolError(f"party {party}: index sets of node {msg.built[i]} differ between features")
        bins = np.repeat(np.arange(width), counts[f])
        out[f, :, 0] = (msg.sums[i, f, :, 0] - ring_bincount(bins, rt.state["pad_g"][rows], width)).view(np.int64)
        out[f, :, 1] = (msg.sums[i, f, :, 1] - ring_bincount(bins, rt.state["pad_h"][rows], width)).view(np.int64)
        out[f, :, 2] = counts[f]
        _check_truth(rt, party, bins, rows, out[f], width)
    return out


def _unmask_with_bins(rt, party, msg, i, rows, width):
    binned = rt.state["bins"][party]
    if binned.shape[1] != rt.state["sampled"].size:
        raise ProtocolError(f"party {party} sent bin assignments for {binned.shape[1]} rows, "
                            f"training has {rt.state['sampled'].size}")
    out = np.zeros((binned.shape[0], width, 3), dtype=np.int64)
    for f in range(binned.shape[0]):
        bins = binned[f, rows].astype(np.intp)
        out[f, :, 0] = (msg.sums[i, f, :, 0] - ring_bincount(bins, rt.state["pad_g"][rows], width)).view(np.int64)
        out[f, :, 1] = (msg.sums[i, f, :, 1] - ring_bincount(bins, rt.state["pad_h"][rows], width)).view(np.int64)
        out[f, :, 2] = np.bincount(bins, minlength=width)
        _check_truth(rt, party, bins, rows, out[f], width)
    return out


def _check_truth(rt, party, bins, rows, sums, width):
    """The enclave knows the true gradients: every unmasked bin sum must equal them."""
    true_g = np.bincount(bins, weights=rt.state["g"][rows].astype(np.float64), minlength=width)
    true_h = np.bincount(bins, weights=rt.state["h"][rows].astype(np.float64), minlength=width)
    if not (np.array_equal(true_g.astype(np.int64), sums[:, 0]) and np.array_equal(true_h.astype(np.int64), sums[:, 1])):
        raise ProtocolError(f"party {party}: masked sums do not match their index sets (tampered or corrupt)")


def ecall_choose(rt, payload):
    msg = _expect(payload, m.OneTeeChooseIn)
    width = rt.state["max_bin"] + 1
    nodes = [int(n) for n in msg.nodes]
    row_sets = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, rt.state["sampled"].size,
                               "node rows")
    node_rows = dict(zip((int(n) for n in msg.row_nodes), row_sets))
    records = m.unpack_records(msg.records.tobytes())
    candidates = [[(0, NodeBest(float(g), -1, -1, False))] for g in msg.own_gains]
    party_best = {}
    for party, record in records.items():
        frame = rt.state["channels"][party].open(record)
        sums = _expect(frame, m.MaskedSums)
        if sums.tree != rt.state["tree"] or sums.sums.ndim != 4 or sums.sums.shape[0] != sums.built.size \
                or sums.sums.shape[2] != width:
            raise ProtocolError(f"party {party}: masked sums of the wrong shape or tree")
        cache = rt.state["cache"].setdefault(party, {})
        computed = {}
        for i, node in enumerate(int(n) for n in sums.built):
            if node not in node_rows:
                raise ProtocolError(f"party {party} built node {node}, which is not in this level")
            if party in rt.state["bins"]:
                computed[node] = _unmask_with_bins(rt, party, sums, i, node_rows[node], width)
            else:
                computed[node] = _unmask_index_sets(rt, party, sums, i, node_rows[node], width)
        for node, parent, sibling in sums.derived.tolist():
            if parent not in cache or sibling not in computed:
                raise ProtocolError(f"party {party} derived node {node} from histograms the enclave lacks")
            computed[node] = cache[parent] - computed[sibling]
        rt.state["cache"][party] = computed
        missing = [n for n in nodes if n not in computed]
        if missing:
            raise ProtocolError(f"party {party} sent no histograms for nodes {missing}")
        hist = np.stack([computed[n] for n in nodes])
        n_value_bins = rt.state["n_value_bins"].get(party)
        if n_value_bins is None:
            n_value_bins = rt.state.setdefault("reported_bins", {}).get(party)
        best = best_splits(hist, n_value_bins, rt.state["codec"], rt.state["criteria"])
        party_best[party] = best
        for i, b in enumerate(best):
            candidates[i].append((party, b))
    parties = np.full(len(nodes), -1, dtype=np.int32)
    gains = np.zeros(len(nodes), dtype=np.float64)
    locators = {}
    for i, node_candidates in enumerate(candidates):
        winner = pick_global_best(node_candidates)
        if winner is None:
            continue
        parties[i], gains[i] = winner[0], winner[1].gain
        if winner[0] != 0:
            locators.setdefault(winner[0], []).append((nodes[i], winner[1]))
    sealed = {}
    for party, won in locators.items():
        frame = serde.encode(m.SplitLocators(rt.state["tree"], np.array([n for n, _ in won], dtype=np.int32),
                                             np.array([b.feature for _, b in won], dtype=np.int32),
                                             np.array([b.bin for _, b in won], dtype=np.int32),
                                             np.array([b.default_left for _, b in won], dtype=bool)))
        sealed[party] = rt.state["channels"][party].seal(frame)
    return serde.encode(m.OneTeeChosen(parties, gains, np.frombuffer(m.pack_records(sealed), dtype=np.uint8)))


def ecall_party_bins(rt, payload):
    """Bin counts per feature a party reported in its handshake (public to the active party)."""
    party = int.from_bytes(payload[:4], "big")
    rt.state.setdefault("reported_bins", {})[party] = np.frombuffer(payload[4:], dtype=np.int64).copy()
    return b""
