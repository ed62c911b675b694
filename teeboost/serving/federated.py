"""``FederatedScorer``: the active party's saved model scoring rows online, its passive parties
answering over gRPC with mutual TLS (``teeboost.protocols.online``).

Concurrent requests are micro-batched in two stages, each its own thread serving one batch at
a time (``teeboost.serving.stage_worker``): the lookup (one blinded round trip per passive party
for the batch's ids, on its own transport session), then the scoring (the routing rounds, one
per tree level, all trees at once, plain, SecureBoost, 1-TEE; or one sealed exchange between
enclaves, N-TEE and strict). While one batch is scored the next one's ids are looked up. Callers
wait on their own event loop or thread, never in one the stages hand off to. A request is
either scored with the model it names or says why not: a row whose id a passive party does not
hold is left unscored with that reason; a passive party that does not answer within
``[serving] timeout`` fails the batch fast with ``PeerUnavailable`` (the service then errors or
falls back, as configured). The next batch reconnects by itself, and a passive party whose
data changed is asked for its new id set (a handle is never used on another version's rows).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.vector_routing import EnsembleArrays, RecordArrays
from ..errors import EnclaveError, IntegrityError, PeerUnavailable as TransportUnavailable, ProtocolError, TeeboostError
from ..model_files import load_active
from ..parties.active import ensemble_digest
from teeboost.protocols.messages import RouteReply
from teeboost.protocols.online import STALE_IDS, OnlineRoute
from .id_cache import BlindedIdCache
from .scorer import PeerUnavailable, ScoredRows
from .stage_sessions import StageSessions
from .stage_worker import StageWorker
from .strict_online import SealedRefusal, SessionPending, StrictOnlineActive

__all__ = ["FederatedScorer"]

MAX_BATCH_ROWS = 1024  # rows scored together (larger requests are scored in several batches)
SETUP_TIMEOUT = 600.0  # seconds for an id set fetch, or a strict session's attestation and table load


class FederatedScorer:
    """Scores with the active party's model in ``model_dir`` (default: its config's)."""

    def __init__(self, config, name: str, model_dir: str | Path | None = None) -> None:
        self.config = config
        self.name = name
        self.model_dir = Path(model_dir) if model_dir is not None else config.model_dir
        self.model = load_active(self.model_dir / "active.json")
        self.digest = ensemble_digest(self.model.ensemble)
        self.version = self.digest[:16]
        self.protocol = self.model.protocol
        self.objective = self.model.ensemble.objective
        self.classes = list(self.model.ensemble.classes or [])
        self.feature_names = list(self.model.feature_names)
        self.vocabularies = dict(self.model.vocabularies)
        self.timeout = float(getattr(config.serving, "timeout", None) or 2.0)
        self.enclaves = "simulated" if self.protocol in ("ntee", "onetee", "strict") else None
        self.caches = {p.index: BlindedIdCache(p.index, p.name) for p in config.peers}
        self._names = {p.index: p.name for p in config.peers}
        self.trees = EnsembleArrays(self.model.ensemble)
        self._width = self.model.ensemble.n_outputs if self.objective == "multiclass" else 1
        self._own = RecordArrays.from_owner(self.model.owner)
        # each stage's own transport sessions: the lookup's, and the scoring's
        self._lookup_sessions = StageSessions(lambda: self.config, timeout=self.timeout, setup_timeout=SETUP_TIMEOUT)
        self._scoring_sessions = StageSessions(lambda: self.config, timeout=self.timeout, setup_timeout=SETUP_TIMEOUT)
        self._strict = None
        if self.protocol in ("strict", "ntee"):  # one sealed exchange between enclaves per batch
            self._strict = StrictOnlineActive(self)
        self.counts = {"batches": 0, "rows": 0, "unmatched": 0, "unavailable": 0, "id_set_fetches": 0, "bytes": 0}
        self._lookups = StageWorker(self._serve_lookups, name=f"lookup-{name}", max_items=MAX_BATCH_ROWS,
                                    size=lambda item: len(item[0]), then=self._to_scoring)
        self._batcher = StageWorker(self._serve, name=f"serve-{name}", max_items=MAX_BATCH_ROWS,
                                    size=lambda item: len(item[0]))

    # -- the Scorer interface

    def score(self, ids: list[str], features: np.ndarray) -> ScoredRows:
        chunks = self._chunks(ids, features)
        futures = [concurrent.futures.Future() for _ in chunks]
        for chunk, future in zip(chunks, futures):
            self._lookups.submit(chunk, future)
        return self._joined([f.result() for f in futures])  # raises PeerUnavailable

    async def score_async(self, ids: list[str], features: np.ndarray) -> ScoredRows:
        """``score`` for a caller on an event loop: it waits there, not in a thread."""
        chunks = self._chunks(ids, features)
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in chunks]
        for chunk, future in zip(chunks, futures):
            self._lookups.submit(chunk, future)
        results = await asyncio.gather(*futures, return_exceptions=True)  # every chunk's, before raising
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return self._joined(results)

    @staticmethod
    def _chunks(ids: list[str], features: np.ndarray) -> list[tuple[list[str], np.ndarray]]:
        """(ids, features) of at most ``MAX_BATCH_ROWS`` rows each."""
        if len(ids) != features.shape[0] or not ids:
            raise ValueError("one id per row, and at least one row")
        return [(ids[a:a + MAX_BATCH_ROWS], features[a:a + MAX_BATCH_ROWS]) for a in range(0, len(ids), MAX_BATCH_ROWS)]

    @staticmethod
    def _joined(parts: list[ScoredRows]) -> ScoredRows:
        return ScoredRows(np.concatenate([p.values for p in parts]), [r for p in parts for r in p.reasons],
                          {"bytes": sum(p.traffic.get("bytes", 0) for p in parts)})

    def _to_scoring(self, item, found, future) -> bool:
        """The lookup stage's result: rows found go on to the scoring stage with their future
        (-> False); a refusal or an unavailable peer is the answer (-> True)."""
        if isinstance(found, _Found):
            self._batcher.submit((item[0], item[1], found), future)
            return False
        return True

    def health(self) -> dict:
        """Each passive party: reachable now, and the id set version held."""
        out = {}
        # the lookup stage's session, shared (one exchange at a time); once it is stale, a session
        # of the check's own: only the stage replaces its sessions, at its next batch, and with no
        # request coming a check on the stale one failed for ever (the README's serving section
        # waited 120 s for a passive party that had restarted as the service started)
        stale = self._lookup_sessions.is_stale
        channel = self._lookup_sessions.dedicated() if stale else self._lookup_sessions.long()
        try:
            for party, cache in self.caches.items():
                cache.refresh(channel)
                out[self._names[party]] = {"reachable": True, "ids": cache.n_ids, "id_set": cache.version[:12]}
        except TeeboostError as exc:
            self._lookup_sessions.stale()
            self._scoring_sessions.stale()
            for party in self.caches:
                out.setdefault(self._names[party], {"reachable": False, "error": str(exc)[:200]})
        finally:
            if stale:
                channel.close()
        return out

    def budget(self) -> dict:
        return {"rows_scored": self.counts["rows"], "rows_unmatched": self.counts["unmatched"]}

    def close(self) -> None:
        self._lookups.close()
        self._batcher.close()
        if self._strict is not None:
            self._strict.close()
        self._lookup_sessions.close()
        self._scoring_sessions.close()

    # -- one lookup micro-batch

    def _serve_lookups(self, batch: list[tuple[list[str], np.ndarray]]) -> list:
        """Each request's (ids, features) -> ``_Found`` (the id set versions and each passive
        party's handles), or a ``ScoredRows`` of refused rows, or ``PeerUnavailable``."""
        ids = [i for part, _ in batch for i in part]
        sessions = self._lookup_sessions
        sessions.begin()
        try:
            channel = sessions.short()
            before = channel.traffic.to_dict()["bytes_total"]
            versions, handles = self._handles(channel, ids, sessions.long)
            sent = channel.traffic.to_dict()["bytes_total"] - before
        except (TransportUnavailable, TimeoutError) as exc:
            return [self._unavailable(exc)] * len(batch)
        except ProtocolError as exc:
            sessions.stale()  # a session in doubt is not used again
            if "did not answer within" in str(exc):  # a stalled link: fail fast, as for one that is down
                return [self._unavailable(exc)] * len(batch)
            if len(batch) > 1:
                return [self._serve_lookups([item])[0] for item in batch]  # one request's refusal is not its neighbours'
            return [self._refused(batch[0][0], exc)]
        out, start = [], 0
        for part, _ in batch:
            stop = start + len(part)
            out.append(_Found(versions, {p: h[start:stop] for p, h in handles.items()},
                              sent * len(part) // max(1, len(ids))))
            start = stop
        return out

    def _unavailable(self, exc: Exception) -> PeerUnavailable:
        """The passive party went away: the sessions of both stages went with it."""
        self._lookup_sessions.stale()
        self._scoring_sessions.stale()
        self.counts["unavailable"] += 1
        party = next((n for i, n in self._names.items() if f"party {i} ({n})" in str(exc)), None)
        return PeerUnavailable(party or next(iter(self._names.values()), "passive party"), str(exc))

    def _refused(self, part: list[str], exc: ProtocolError) -> ScoredRows:
        """The passive party refused these rows (its policy, its budget, a fault it names): they
        are not scored, and say why."""
        reason = str(exc).split(": ", 1)[-1] if "refused the request" in str(exc) else str(exc)
        return ScoredRows(np.full((len(part), self._width), np.nan), [reason[:500]] * len(part))

    # -- one scoring micro-batch

    def _serve(self, batch: list[tuple[list[str], np.ndarray, "_Found"]]) -> list:
        ids = [i for part, _, _ in batch for i in part]
        raw = np.concatenate([np.asarray(x, dtype=np.float64) for _, x, _ in batch]) if batch else np.zeros((0, 0))
        looked_up = sum(f.sent for _, _, f in batch)  # the lookup stage's bytes for these requests
        found = None
        if batch and all(f.versions == batch[0][2].versions for _, _, f in batch):
            found = _Found(batch[0][2].versions, {p: np.concatenate([f.handles[p] for _, _, f in batch])
                                                  for p in batch[0][2].handles}, looked_up)
        if self._scoring_sessions.begin() and self._strict is not None:
            self._strict.reset()  # its enclave session lived on the sessions just replaced
        requests = np.repeat(np.arange(len(batch)), [len(part) for part, _, _ in batch])
        try:
            try:
                values, reasons, sent = self._score_rows(ids, raw, found, looked_up, requests)
            except ProtocolError as exc:
                if isinstance(exc, SealedRefusal) or STALE_IDS not in str(exc):
                    raise  # a sealed refusal's words may be its host's (N-TEE): never read as stale ids (red team)
                if self._strict is not None:  # its sealed request was never opened: the channel is a record ahead
                    self._strict.reset()
                self._forget_versions(str(exc))  # the data changed between the lookup and the routing:
                values, reasons, sent = self._score_rows(ids, raw, None, looked_up, requests)  # again, once
        except SessionPending as exc:  # its transport sessions are fine: kept for the attestation under way
            self.counts["unavailable"] += 1
            return [exc] * len(batch)
        except (TransportUnavailable, TimeoutError) as exc:
            return [self._unavailable(exc)] * len(batch)
        except SealedRefusal as exc:  # sealed by the passive enclave: the session is in step, and kept
            if len(batch) > 1:  # a whole batch refused by its host's rule, which the host knows
                return [self._alone(item) for item in batch]  # one request's refusal is not its neighbours'
            return [self._refused(batch[0][0], exc)]
        except (ProtocolError, IntegrityError, EnclaveError) as exc:
            # a session in doubt is not used again: a record that fails its check, or an enclave
            # stopped by a failed call, left every later request failing until a restart (red team)
            self._scoring_sessions.stale()
            if self._strict is not None:
                self._strict.reset()
            if "did not answer within" in str(exc):  # a stalled link: fail fast, as for one that is down
                return [self._unavailable(exc)] * len(batch)
            if len(batch) > 1:
                return [self._alone(item) for item in batch]  # one request's refusal is not its neighbours'
            return [self._refused(batch[0][0], exc)]
        out, start = [], 0
        for part, _, _ in batch:
            stop = start + len(part)
            out.append(ScoredRows(values[start:stop], reasons[start:stop], {"bytes": sent * len(part) // max(1, len(ids))}))
            start = stop
        return out

    def _alone(self, item):
        return self._serve([item])[0]

    def _forget_versions(self, message: str) -> None:
        """The id set version of the passive party a stale-ids refusal names (every one's if it
        names none): its set is fetched again."""
        named = [p for p, n in self._names.items() if f"party {n!r}" in message]
        for party in named or list(self.caches):
            self.caches[party].version = ""

    def _score_rows(self, ids: list[str], raw: np.ndarray, found: "_Found | None",
                    looked_up: int, requests: np.ndarray | None = None) -> tuple[np.ndarray, list, int]:
        """``found``: the lookup stage's answer for ``ids`` (None: look them up here, on this
        stage's own session, e.g. again after the passive party's data changed); ``looked_up``:
        the lookup stage's bytes for them; ``requests``: each row's request in the micro-batch."""
        requests = np.zeros(len(ids), np.int64) if requests is None else requests
        sessions = self._scoring_sessions
        channel = sessions.short()
        before = channel.traffic.to_dict()["bytes_total"]
        versions, handles = ((found.versions, found.handles) if found is not None
                             else self._handles(channel, ids, sessions.long))
        held = np.all(np.stack([h >= 0 for h in handles.values()]), axis=0) if handles else np.ones(len(ids), bool)
        values = np.full((len(ids), self._width), np.nan)
        reasons: list = [None] * len(ids)
        for party, h in handles.items():
            for i in np.flatnonzero(h < 0):
                if reasons[i] is None:
                    reasons[i] = f"passive party {self._names[party]!r} does not hold this id"
        rows = np.flatnonzero(held)
        # strict: one request whatever it holds (its passive enclave charges a customer named
        # twice once per naming; split, the requests showed its host a repeated customer: red
        # team); otherwise the passive party answers about distinct rows
        groups = ([np.arange(rows.size)] if self.protocol == "strict" and rows.size else
                  _distinct_groups([tuple(int(h[i]) for h in handles.values()) for i in rows]))
        for group in groups:
            chosen = rows[group]
            part = {p: h[chosen] for p, h in handles.items()}
            refused, why = np.zeros(chosen.size, bool), ""
            if self._strict is not None:
                numbered = np.unique(requests[chosen], return_inverse=True)[1].reshape(-1)
                margin, refused, why = self._strict.margin(channel, raw[chosen], part, versions, numbered)
            else:
                margin = self.trees.margin(chosen.size, self._asker(channel, raw[chosen], part, versions))
            values[chosen] = np.asarray(self.model.ensemble.loss.predict(margin)).reshape(chosen.size, self._width)
            values[chosen[refused]] = np.nan
            for i in chosen[refused]:
                reasons[i] = why[:500]
        sent = channel.traffic.to_dict()["bytes_total"] - before + looked_up
        self.counts["batches"] += 1
        self.counts["rows"] += int(rows.size)
        self.counts["unmatched"] += len(ids) - int(rows.size)
        self.counts["bytes"] += sent
        return values, reasons, sent

    def _asker(self, channel, raw: np.ndarray, handles: dict[int, np.ndarray], versions: dict[int, str]):
        """Own questions answered here; a passive party's, one ``OnlineRoute`` per level, all
        naming the id set version the handles were found in."""
        batch = secrets.token_bytes(16)

        def ask(party: int, records: np.ndarray, rows: np.ndarray) -> np.ndarray:
            if party == 0:
                return self._own.go_left(raw, rows, records)
            k = handles[party].size
            request = OnlineRoute(self.digest, versions[party], batch, handles[party], records.astype(np.int32),
                                  rows.astype(np.uint16) if k > 1 else np.zeros(0, np.uint16))
            reply = channel.request(party, request)
            if not isinstance(reply, RouteReply) or reply.n_answers != records.size \
                    or reply.bits.size != (records.size + 7) // 8:
                raise ProtocolError(f"passive party {party} answered {getattr(reply, 'n_answers', '?')} online "
                                    f"routing questions, expected {records.size}")
            return np.unpackbits(reply.bits, count=records.size).astype(bool)
        return ask

    def _handles(self, channel, ids: list[str], setup) -> tuple[dict[int, str], dict[int, np.ndarray]]:
        """Each passive party's (id set version, handles for ``ids``), its id set fetched first
        if not held, or again once if it changed."""
        versions, out = {}, {}
        for party, cache in self.caches.items():
            for attempt in range(2):
                try:
                    if not cache.version:
                        cache.refresh(setup())
                        self.counts["id_set_fetches"] += 1
                    versions[party], out[party] = cache.handles(channel, ids)
                    break
                except ProtocolError as exc:
                    if STALE_IDS not in str(exc) or attempt:
                        raise
                    cache.version = ""  # its data changed: fetch the new set, then ask again
        return versions, out

    # -- the connection

    @property
    def setup_sessions(self) -> StageSessions:
        """Where a strict session is attested and its table loaded: the scoring stage's."""
        return self._scoring_sessions

@dataclass(frozen=True)
class _Found:
    """A request's ids in each passive party's id set: the set versions, and the handles (-1:
    not held)."""

    versions: dict[int, str]
    handles: dict[int, np.ndarray]
    sent: int  # this request's share of the lookup's bytes between the parties


def _distinct_groups(keys: list[tuple]) -> list[np.ndarray]:
    """Split positions so that no group holds the same passive row twice (a passive party
    answers a request about distinct rows): the k-th time a row appears goes to group k."""
    if not keys:
        return []
    _, inverse = np.unique(np.array(keys, dtype=np.int64).reshape(len(keys), -1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(inverse[order])) + 1]
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys)) - np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    return [np.flatnonzero(rank == k) for k in range(int(rank.max()) + 1)]
