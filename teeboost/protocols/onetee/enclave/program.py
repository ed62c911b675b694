"""1-TEE enclave program: the only enclave, at the active party.

It learns each passive party's histograms in one of two ways, chosen for the run:
- bins-once (the default): the party seals its bin of every row per feature to this enclave
  once. Per tree the enclave sums the exact gradients it holds over those bins itself, as plain
  does (the smaller child of a split summed, its sibling = parent - child), and it seals to
  each passive party the tree's rows and, per level, the partitions that party did not make:
  no host can show a passive party other rows than the ones the enclave scores.
- index sets (the seed paper's): a fresh uniform one-time pad in Z_2^64 for every sampled
  row's fixed-point g and h, so masked values reveal nothing to passive parties. They sum
  masked values per bin (exact wrap-around arithmetic) and seal the sums with the index sets
  that produced them; the enclave subtracts the pads of each index set, checks every bin sum
  against the true gradients it holds and derives sibling nodes only along its own tree.
Either way it scores every split of every party and releases only the winner per node: to its
host the winning party and gain, to the winning passive party (sealed) its feature, bin and the
ids its children get.

Passive parties stay in control of how much is computed over their bins: in bins-once runs the
enclave computes no level (the first of a tree included) and starts no tree until every
passive party has acknowledged, in a record over its own channel, the enclave's last record
to it (the tree's rows, or the last level's partitions), which it does only within its policy;
and whatever they acknowledge, tree indices only increase and a tree has at most as many
levels and the run at most as many trees as the strictest party's limits (sealed by each
party in its first record).

What it does not take from the host: a party's identity (pinned keys sign each handshake,
once per run), a party's bin counts and limits (sealed by the party), node rows and child ids
(its own ``CheckedTree``), its own candidates' gains (computed here from left sums), the
sealing context (the run's, with a value each passive party chose and sealed: a checkpoint
opens only in a run whose parties resumed it).
"""

import json
import os

import numpy as np

from teeboost.core.constraints import PathColumns
from teeboost.core.gradients import EncodedGradients
from teeboost.core.histogram import HistogramBuilder
from teeboost.core.split import (MAX_CATEGORY_BINS, NodeBest, best_splits, bins_fit_counts, goes_left, left_sums,
                                 sampled_features)
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave import messages as m
from teeboost.protocols.enclave.session import session, start_session
from teeboost.protocols.enclave.limits import CheckedLimits, check_holders, held_names, party_constraints_of, scoring_limits
from teeboost.protocols.enclave.tree import CheckedTree
from teeboost.protocols.enclave.partition import HistogramRequest, bit_chunks, encode_row_sets
from teeboost.protocols.onetee.enclave.ring import ring_bincount
from teeboost.tee.channel import ChannelResponder
from teeboost.transport import serde

PROTOCOL = "onetee"
BINS_ONCE, INDEX_SETS = "bins-once", "index sets"


def _expect(frame, cls):
    msg = serde.decode(frame)
    if not isinstance(msg, cls):
        raise ProtocolError(f"expected {cls.__name__}, got {type(msg).__name__}")
    return msg


def ecall_init(rt, payload):
    start_session(rt, _expect(payload, m.EnclaveInit), PROTOCOL, role="active")
    rt.state.update(responders={}, bins={}, builders={}, meta={}, cache={}, owners={}, salts={}, limits={},
                    outstanding={}, last_tree=-1, levels=0, constrained={}, paths={}, level_limits=None)
    return b""


def ecall_respond(rt, payload):
    """A passive party's host opens an attested channel to this enclave (once per run)."""
    current = session(rt)
    party = int.from_bytes(payload[:4], "big")
    current.begin(party)
    responder = ChannelResponder(attester=rt.quote, aes_bits=current.aes_bits, context=current.context)
    rt.state["responders"][party] = responder
    return responder.respond(payload[4:])


def ecall_finish_responder(rt, payload):
    """final handshake message, the party's signature over the handshake, and the party's
    first sealed record (its bin counts)."""
    current = session(rt)
    party = int.from_bytes(payload[:4], "big")
    responder = rt.state["responders"].pop(party, None)
    if responder is None:
        raise ProtocolError(f"no handshake with party {party} is under way")
    parts = m.unpack_records(payload[4:])
    current.established(party, responder.finish(parts.get(0, b"")))
    channel = current.confirm(party, "initiator", parts.get(1, b""))
    meta = _expect(channel.open(parts.get(2, b"")), m.PartyMeta)
    bins = meta.n_value_bins
    if bins.size == 0 or np.any(bins < 1) or np.any(bins > current.max_bin) or meta.n_rows < 1 \
            or meta.categorical.shape != bins.shape or np.any(meta.categorical & (bins > MAX_CATEGORY_BINS)):
        raise ProtocolError(f"party {party} reported invalid bin counts")
    if len(meta.seal_salt) != 32 or meta.max_trees < 0 or meta.max_depth < 0:
        raise ProtocolError(f"party {party} sent an invalid sealing value or limits")
    constrained = party_constraints_of(current.constraints, meta.names, bins.size)  # resolved here, from the bound rules
    if constrained is not None:
        rt.state["constrained"][party] = constrained
        rt.state.setdefault("held", {})[party] = held_names(current.constraints, meta.names)
    rt.state["paths"][party] = PathColumns()
    rt.state["meta"][party] = (int(meta.n_rows), bins.copy())
    rt.state.setdefault("categorical", {})[party] = meta.categorical.copy()
    rt.state["salts"][party] = bytes(meta.seal_salt)
    rt.state["limits"][party] = (int(meta.max_trees), int(meta.max_depth))
    rt.state["outstanding"][party] = None
    return b""


def _check_bins(rt, party, n_value_bins, categorical, binned):
    """A party's bin assignments, fresh or restored: its own features, counts and rows."""
    n_rows, reported = rt.state["meta"][party]
    if not np.array_equal(n_value_bins, reported) or binned.shape != (reported.size, n_rows) \
            or not np.array_equal(categorical, rt.state["categorical"][party]):
        raise ProtocolError(f"party {party} sent bin assignments for other features or rows than it reported")
    missing_bin = session(rt).max_bin
    for f in range(reported.size):  # the one rule every enclave applies to binned columns
        if not bins_fit_counts(binned[f:f + 1], reported[f:f + 1], missing_bin):
            raise ProtocolError(f"party {party} sent out-of-range bins for feature {f}")


def _hold_bins(rt, party, binned):
    """Keep a party's checked bins in their own size (not the wire's) and a histogram builder
    over them."""
    max_bin = session(rt).max_bin
    binned = binned.astype(np.uint8 if max_bin <= 255 else np.uint16)
    rt.state["bins"][party] = binned
    rt.state["builders"][party] = HistogramBuilder(binned, max_bin + 1)


def ecall_bins_once(rt, payload):
    """A passive party's bin assignments (BinsOnce, sealed by that party)."""
    party = int.from_bytes(payload[:4], "big")
    msg = _expect(session(rt).channel(party).open(memoryview(payload)[4:]), m.BinsOnce)
    _check_bins(rt, party, msg.n_value_bins, msg.categorical, msg.binned)
    _hold_bins(rt, party, msg.binned)
    return b""


def _checkpoint_context(rt):
    """The run context (derived here from the attested init) and the value every passive
    party chose for this run and sealed to this enclave (kept in its own checkpoint, so it
    comes back only when the party itself resumes the run)."""
    current = session(rt)
    current.require_all_peers()
    salts = b"".join(p.to_bytes(4, "big") + rt.state["salts"][p] for p in current.peers)
    return b"teeboost-checkpoint/onetee/v2/" + current.context + salts


def ecall_checkpoint(rt, payload):
    """Seal what only this enclave holds and a resumed run needs: the passive parties' bin
    assignments (bins-once), bound to this measurement, platform, run context and the
    passive parties' sealing values (never chosen by the host)."""
    records = {p: serde.encode(m.BinsOnce(rt.state["meta"][p][1], rt.state["categorical"][p], rt.state["bins"][p]))
               for p in sorted(rt.state["bins"])}
    return rt.seal(m.pack_records(records), _checkpoint_context(rt))


def ecall_restore(rt, blob):
    """Unseal a checkpoint of this run (IntegrityError if it is another run's, one a passive
    party did not resume, or altered) and validate it like fresh input against the parties'
    own reports of this run."""
    records = m.unpack_records(rt.unseal(blob, _checkpoint_context(rt)))
    restored = {}
    for party, frame in records.items():
        if party not in rt.state["meta"]:
            raise ProtocolError(f"the checkpoint holds bins of party {party}, which has no channel in this run")
        msg = _expect(frame, m.BinsOnce)
        _check_bins(rt, party, msg.n_value_bins, msg.categorical, msg.binned)
        restored[party] = msg.binned
    for party, binned in restored.items():
        _hold_bins(rt, party, binned)
    return np.array(sorted(restored), dtype=np.int64).tobytes()


def _limit(rt, which):
    """The strictest passive party's limit (0: none): which = 0 for trees, 1 for depth."""
    limits = [lim[which] for lim in rt.state["limits"].values() if lim[which] > 0]
    return min(limits) if limits else 0


def _require_acks(rt, what):
    """Nothing is computed over passive bins while a party has not acknowledged the enclave's
    last record to it (the tree's rows or the last level's partitions)."""
    waiting = [p for p, digest in sorted(rt.state["outstanding"].items()) if digest is not None]
    if waiting:
        raise ProtocolError(f"parties {waiting} have not acknowledged the enclave's last record to them: "
                            f"no {what} before they do")


def ecall_acks(rt, payload):
    """Passive parties' acknowledgements (RecordAck, each sealed by its party) of the
    enclave's last record to them; each must name that very record."""
    current = session(rt)
    outstanding = rt.state["outstanding"]
    for party, record in m.unpack_records(payload).items():
        if outstanding.get(party) is None:
            raise ProtocolError(f"party {party} acknowledged a record the enclave did not send it")
        ack = _expect(current.channel(party).open(record), m.RecordAck)
        if ack.digest != outstanding[party]:
            raise ProtocolError(f"party {party} acknowledged another record than the enclave's last to it")
        outstanding[party] = None
    return b""


def _seal_expecting_ack(rt, party, frame, digest=None):
    """Seal ``frame`` to ``party``; it must acknowledge it (``digest``: its ``record_digest``)
    before anything more is computed."""
    rt.state["outstanding"][party] = digest or m.record_digest(frame)
    return session(rt).channel(party).seal(frame)


def _count_level(rt):
    """At most the strictest party's depth of levels per tree."""
    depth = _limit(rt, 1)
    if depth and rt.state["levels"] >= depth:
        raise ProtocolError(f"a tree of at most {depth} levels (a passive party's limit) asked for level "
                            f"{rt.state['levels'] + 1}")
    rt.state["levels"] += 1


def _new_tree(rt, payload, mode):
    """This tree's gradients from the host (who owns the labels); the last tree's state goes
    before this one's arrays are built. Tree indices only increase, within the passive
    parties' limit."""
    current = session(rt)
    current.require_all_peers()
    msg = _expect(payload, m.TreeGradients)
    for party in current.peers:
        if rt.state["meta"][party][0] != msg.n_rows:
            raise ProtocolError(f"gradients for {msg.n_rows} rows; party {party} holds {rt.state['meta'][party][0]}")
    trees = _limit(rt, 0)
    if msg.tree <= rt.state["last_tree"] or (trees and msg.tree >= trees):
        raise ProtocolError(f"tree {msg.tree}: trees are grown once each, in increasing order, "
                            f"{'below ' + str(trees) if trees else 'from 0'} (after tree {rt.state['last_tree']})")
    rt.state.update(tree=None, pad_g=None, pad_h=None, cache={}, owners={}, bests=None, mode=mode,
                    last_tree=int(msg.tree), levels=0, level_limits=None)
    for paths in rt.state["paths"].values():
        paths.reset()
    for builder in rt.state["builders"].values():
        builder.end_tree()
    tree = CheckedTree.from_message(msg, current.criteria)
    if current.constraints.any:
        tree.limits = CheckedLimits(current.criteria, len(current.constraints.interaction))
        tree.limits.own_classes = rt.state.get("own_classes", set())
    rt.state["tree"] = tree
    return current, tree


def _open_tree(rt, mode):
    tree = rt.state.get("tree")
    if tree is None or rt.state.get("mode") != mode:
        raise ProtocolError(f"no tree is open in {mode} mode")
    return tree


def _left_digest(rt, party, node, best):
    """``partition_digest`` of the rows the party's winning split sends left, computed here."""
    binned = rt.state["bins"].get(party)
    if binned is None:
        binned = rt.state["row_bins"][party]
    rows = rt.state["tree"].nodes.rows(node)
    categorical = bool(rt.state["categorical"][party][best.feature])
    went_left = goes_left(binned[best.feature, rows], best.bin, best.default_left, categorical, session(rt).max_bin)
    return m.partition_digest(np.packbits(went_left))


def _passive_candidates(rt, party, nodes, hist, candidates):
    """Best split per node of one party's exact histograms, appended to ``candidates``; its
    winners' partition digests are computed only if they win. Returns the bests."""
    tree, current = rt.state["tree"], session(rt)
    categorical = rt.state["categorical"][party]
    n_value_bins = rt.state["meta"][party][1]
    sampled = sampled_features(current.criteria, party, tree.tree, n_value_bins.size)
    bounds, sets = rt.state["level_limits"] or (np.zeros((0, 2)), np.zeros(0, np.int64))
    bests = best_splits(hist, n_value_bins, tree.codec, current.criteria, categorical, sampled,
                        **scoring_limits(rt.state["constrained"].get(party), rt.state["paths"][party].of(nodes), bounds,
                                         sets))
    for i, b in enumerate(bests):
        if b.valid:
            left = left_sums(hist[i, b.feature], b.bin, b.default_left, bool(categorical[b.feature]))
            digest = (lambda node=nodes[i], b=b: _left_digest(rt, party, node, b))
        else:
            left, digest = np.zeros(3, dtype=np.int64), None
        candidates[i].append((party, NodeBest(b.gain, -1, -1, False), left, digest))
    return bests


def _release(rt, tree, nodes, candidates, bests):
    """Winner per node: the party and gain to the host; each winning passive party's feature,
    bin and direction sealed to it alone."""
    current = session(rt)
    _check_holders(rt)
    parties, gains = tree.choose(candidates)
    rt.state["owners"] = {nodes[i]: int(p) for i, p in enumerate(parties) if p >= 0}
    constrained = _track_winners(rt, tree, nodes, parties, bests)
    won = {}
    for i, party in enumerate(parties):
        if party > 0:
            won.setdefault(int(party), []).append((nodes[i], bests[int(party)][i]))
    sealed = {}
    for party, splits in won.items():
        children = np.array([tree.children(n) for n, _ in splits], dtype=np.int32).reshape(-1, 2)
        frame = serde.encode(m.SplitLocators(tree.tree, np.array([n for n, _ in splits], dtype=np.int32),
                                             children[:, 0].copy(), children[:, 1].copy(),
                                             np.array([b.feature for _, b in splits], dtype=np.int32),
                                             np.array([b.bin for _, b in splits], dtype=np.int64),
                                             np.array([b.default_left for _, b in splits], dtype=bool)))
        sealed[party] = current.channel(party).seal(frame)
    return serde.encode(m.OneTeeChosen(parties, gains, np.frombuffer(m.pack_records(sealed), dtype=np.uint8),
                                       **constrained))


def ecall_own_names(rt, payload):
    """The active party's column names (under constraints): which constrained names it holds."""
    current = session(rt)
    names = bytes(payload).decode()
    rt.state.setdefault("held", {})[0] = held_names(current.constraints, names)
    own = current.constraints.for_party(json.loads(names))
    rt.state["own_classes"] = set(zip(own.directions.tolist(), own.membership.tolist()))
    return b""


def _check_holders(rt) -> None:
    """Once per run, before any constrained choice: every constrained name held exactly once,
    by the names each party gave with its columns."""
    current = session(rt)
    if not current.constraints.any or rt.state.get("holders_checked"):
        return
    held = rt.state.get("held", {})
    if 0 not in held:
        raise ProtocolError("the active host did not name its own columns (the run has constraints)")
    check_holders(current.constraints, held)
    rt.state["holders_checked"] = True


def _track_winners(rt, tree, nodes, parties, bests) -> dict:
    """Each passive party's columns on the new children's paths; under constraints, the
    winning columns' public direction and interaction sets (``OneTeeChosen`` fields)."""
    for i, party in enumerate(parties):
        if party < 0:
            continue
        left, right = tree.children(nodes[i])
        feature = bests[int(party)][i].feature if party > 0 else -1
        for other, paths in rt.state["paths"].items():
            paths.split(nodes[i], left, right, feature if other == party else -1)
    if not rt.state["constrained"]:
        return {}
    directions, memberships = np.zeros(len(nodes), np.int8), np.zeros(len(nodes), np.int64)
    own = rt.state.get("own_directions")
    classes = {}
    for i, party in enumerate(parties):
        if party > 0:
            feature = bests[int(party)][i].feature
            directions[i] = rt.state["constrained"][int(party)].directions[feature]
            memberships[i] = rt.state["constrained"][int(party)].membership[feature]
            classes[nodes[i]] = (int(directions[i]), int(memberships[i]))
        elif party == 0:
            classes[nodes[i]] = (int(own[i]) if own is not None and own.size else 0, None)
    if tree.limits is not None:
        tree.limits.note_classes(classes)
    return {"directions": directions, "memberships": memberships}


def _set_level_limits(rt, nodes, bounds, sets) -> None:
    """This level's node bounds and interaction sets (the host's grower's), for every party's candidates."""
    if bounds.size == 0 and sets.size == 0:
        rt.state["level_limits"] = None
        return
    if bounds.shape != (len(nodes), 2) or sets.shape != (len(nodes),):
        raise ProtocolError("node bounds or interaction sets do not match the level's nodes")
    rt.state["level_limits"] = (bounds, sets)


# ---- bins-once: the enclave sums every passive party's histograms itself

def ecall_gradients(rt, payload):
    """This tree's gradients -> the tree's rows, sealed to each passive party (each must
    acknowledge them before the tree's first level)."""
    current = session(rt)
    missing = [p for p in current.peers if p not in rt.state["bins"]]
    if missing:
        raise ProtocolError(f"parties {missing} sent no bin assignments: this run sums index sets")
    _require_acks(rt, "new tree")
    current, tree = _new_tree(rt, payload, BINS_ONCE)
    gradients = EncodedGradients(tree.g, tree.h, tree.codec)
    for builder in rt.state["builders"].values():
        builder.begin_tree(gradients)
    encoding, offsets, rows = encode_row_sets([tree.nodes.rows(0)], tree.nodes.n_rows)
    frame = serde.encode(m.TreeRows(tree.tree, tree.nodes.n_rows, encoding, offsets, rows))
    digest = m.record_digest(frame)
    return m.pack_records({p: _seal_expecting_ack(rt, p, frame, digest) for p in current.peers})


def ecall_level(rt, payload):
    """Last level's partitions (checked) and this level's nodes -> every passive party's exact
    histograms and best splits (kept for ``choose_own``), and each party's level request
    (the partitions it did not make), sealed to it."""
    current = session(rt)
    msg = _expect(payload, m.LevelIn)
    tree = _open_tree(rt, BINS_ONCE)
    _require_acks(rt, "level")
    _count_level(rt)
    owners = rt.state["owners"]
    sizes = [tree.size(int(node)) for node in msg.split_nodes]
    nodes = tree.begin_level(msg.tree, msg.nodes, msg.split_nodes, msg.split_lefts, msg.split_rights, msg.split_bits,
                             msg.bounds, msg.sets)
    _set_level_limits(rt, nodes, msg.bounds, msg.sets)
    chunks = bit_chunks(sizes, msg.split_bits)  # each partition's bits, checked by begin_level
    records, hists = {}, {}
    for party in current.peers:
        keep = [i for i, node in enumerate(msg.split_nodes) if owners.get(int(node)) != party]
        records[party] = _seal_expecting_ack(rt, party, serde.encode(HistogramRequest(
            msg.tree, msg.nodes.astype(np.int32), msg.split_nodes[keep].astype(np.int32),
            msg.split_lefts[keep].astype(np.int32), msg.split_rights[keep].astype(np.int32),
            np.concatenate([chunks[i] for i in keep]) if keep else np.empty(0, dtype=np.uint8))))
        hists[party] = rt.state["builders"][party].level(nodes, tree.nodes)
    rt.state["hists"] = hists
    return m.pack_records(records)


def ecall_choose_own(rt, payload):
    """The host's own best split per node (as left sums) -> the winner per node."""
    msg = _expect(payload, m.OwnSplitsIn)
    tree = _open_tree(rt, BINS_ONCE)
    hists = rt.state.pop("hists", None)
    if hists is None or msg.tree != tree.tree or [int(n) for n in msg.nodes] != tree.level:
        raise ProtocolError("own splits for a level the enclave has not summed")
    nodes = tree.level
    own = tree.own_candidates(msg.own_valid, msg.own_left, msg.own_directions)
    rt.state["own_directions"] = msg.own_directions
    candidates = [[(0, best, msg.own_left[i], None)] for i, best in enumerate(own)]
    bests = {party: _passive_candidates(rt, party, nodes, hist, candidates) for party, hist in sorted(hists.items())}
    return _release(rt, tree, nodes, candidates, bests)


# ---- index sets (the seed paper's): passive parties sum one-time-padded gradients

def ecall_mask(rt, payload):
    """Host's gradients -> masked gradients; the pads never leave the enclave."""
    current, tree = _new_tree(rt, payload, INDEX_SETS)
    rows = tree.nodes.rows(0)
    pads = np.frombuffer(os.urandom(16 * rows.size), dtype=np.uint64).reshape(2, rows.size)
    pad_g = np.zeros(tree.nodes.n_rows, dtype=np.uint64)
    pad_h = np.zeros(tree.nodes.n_rows, dtype=np.uint64)
    pad_g[rows], pad_h[rows] = pads[0], pads[1]
    masked_g, masked_h = tree.g[rows].view(np.uint64) + pads[0], tree.h[rows].view(np.uint64) + pads[1]
    rt.state.update(pad_g=pad_g, pad_h=pad_h, sent=m.masked_digest(tree.tree, rows, masked_g, masked_h))
    return serde.encode(m.MaskedGradientsIn(masked_g, masked_h))


def _unmask_index_sets(rt, party, msg, i, node_rows, width):
    """Built node i of ``msg``: (features, width, 3) exact sums from sums and index sets,
    which must name exactly the node's rows (no row of another node, none twice)."""
    n_features = msg.sums.shape[1]
    counts = msg.index_counts[i]
    per_feature = node_rows.size
    start = int(msg.index_counts[:i].sum())
    out = np.zeros((n_features, width, 3), dtype=np.int64)
    reference = np.sort(node_rows)
    reported = rt.state["meta"][party][1]
    for f in range(n_features):
        if int(counts[f].sum()) != per_feature or np.any(counts[f] < 0) or np.any(counts[f, reported[f]:width - 1]):
            raise ProtocolError(f"party {party}: index sets of node {msg.built[i]} name rows that are not the node's rows")
        rows = msg.index_rows[start + f * per_feature:start + (f + 1) * per_feature].astype(np.int64)
        if not np.array_equal(np.sort(rows), reference):
            raise ProtocolError(f"party {party}: index sets of node {msg.built[i]} name rows that are not the node's rows")
        bins = np.repeat(np.arange(width), counts[f])
        _row_bins(rt, party, n_features)[f, rows] = bins
        out[f, :, 0] = (msg.sums[i, f, :, 0] - ring_bincount(bins, rt.state["pad_g"][rows], width)).view(np.int64)
        out[f, :, 1] = (msg.sums[i, f, :, 1] - ring_bincount(bins, rt.state["pad_h"][rows], width)).view(np.int64)
        out[f, :, 2] = counts[f]
        _check_truth(rt, party, bins, rows, out[f], width)
    return out


def _row_bins(rt, party, n_features):
    """Each row's bin per feature of ``party`` as learnt from its index sets (the root is always
    built, so every sampled row is known): how the enclave knows a winner's exact left rows."""
    held = rt.state.setdefault("row_bins", {})
    n_rows = rt.state["pad_g"].size
    if party not in held or held[party].shape != (n_features, n_rows):
        held[party] = np.zeros((n_features, n_rows), dtype=np.uint16)
    return held[party]


def _check_truth(rt, party, bins, rows, sums, width):
    """The enclave knows the true gradients: every unmasked bin sum must equal them."""
    tree = rt.state["tree"]
    true_g = np.bincount(bins, weights=tree.g[rows].astype(np.float64), minlength=width)
    true_h = np.bincount(bins, weights=tree.h[rows].astype(np.float64), minlength=width)
    if not (np.array_equal(true_g.astype(np.int64), sums[:, 0]) and np.array_equal(true_h.astype(np.int64), sums[:, 1])):
        raise ProtocolError(f"party {party}: masked sums do not match their index sets (tampered or corrupt)")


def _party_histograms(rt, party, sums, nodes, width):
    """One party's exact histograms of this level's nodes: built ones unmasked and checked,
    derived ones only as (node, its parent, its sibling) of the enclave's own tree."""
    tree = rt.state["tree"]
    n_features = rt.state["meta"][party][1].size
    if sums.tree != tree.tree or sums.sums.ndim != 4 or sums.sums.shape[:3] != (sums.built.size, n_features, width) \
            or sums.derived.ndim != 2 or sums.derived.shape[1] != 3:
        raise ProtocolError(f"party {party}: masked sums of the wrong shape or tree")
    if sums.gradients_digest != rt.state["sent"]:
        raise ProtocolError(f"party {party} summed other masked gradients than the enclave produced "
                            "(altered on the way)")
    cache = rt.state["cache"].get(party, {})
    computed = {}
    # a requested node's smaller sibling may be built only to derive the node from their parent
    buildable = set(nodes) | {tree.nodes.sibling(n) for n in nodes if tree.nodes.parent(n) >= 0}
    for i, node in enumerate(int(n) for n in sums.built):
        if node not in buildable or node in computed or node not in tree.nodes:
            raise ProtocolError(f"party {party} built node {node}, which is not in this level (or twice)")
        computed[node] = _unmask_index_sets(rt, party, sums, i, tree.nodes.rows(node), width)
    for node, parent, sibling in sums.derived.tolist():
        if node not in nodes or node in computed or node not in tree.nodes or tree.nodes.parent(node) != parent \
                or tree.nodes.sibling(node) != sibling or parent not in cache or sibling not in computed:
            raise ProtocolError(f"party {party} derived node {node} from histograms that are not its parent and "
                                "sibling")
        derived = cache[parent] - computed[sibling]
        if not np.all(derived.sum(axis=1) == tree.totals(node)[None, :]):
            raise ProtocolError(f"party {party}: derived histograms of node {node} do not add up to the node")
        computed[node] = derived
    missing = [n for n in nodes if n not in computed]
    if missing:
        raise ProtocolError(f"party {party} sent no histograms for nodes {missing}")
    rt.state["cache"][party] = computed
    return np.stack([computed[n] for n in nodes])


def ecall_choose(rt, payload):
    current = session(rt)
    msg = _expect(payload, m.OneTeeChooseIn)
    tree = _open_tree(rt, INDEX_SETS)
    _count_level(rt)
    width = current.max_bin + 1
    nodes = tree.begin_level(msg.tree, msg.nodes, msg.split_nodes, msg.split_lefts, msg.split_rights, msg.split_bits,
                             msg.bounds, msg.sets)
    _set_level_limits(rt, nodes, msg.bounds, msg.sets)
    own = tree.own_candidates(msg.own_valid, msg.own_left, msg.own_directions)
    rt.state["own_directions"] = msg.own_directions
    candidates = [[(0, best, msg.own_left[i], None)] for i, best in enumerate(own)]
    records = m.unpack_records(msg.records.tobytes())
    if sorted(records) != current.peers:
        raise ProtocolError("sums must come from every passive party")
    bests = {}
    for party, record in sorted(records.items()):
        sums = _expect(current.channel(party).open(record), m.MaskedSums)
        hist = _party_histograms(rt, party, sums, nodes, width)
        bests[party] = _passive_candidates(rt, party, nodes, hist, candidates)
    return _release(rt, tree, nodes, candidates, bests)
