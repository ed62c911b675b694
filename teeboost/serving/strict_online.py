"""The active host's side of online scoring in one sealed exchange between enclaves (strict and
N-TEE): one attested session of strict enclaves kept open across requests
(``teeboost.protocols.strict.enclave.online``), over the online channel. Only margins come out
of its enclave; for N-TEE the rows' handles, the output count and the path bound its enclave
computes go to the passive host in the clear, for it to charge. A session in doubt (a fault, a
passive party restarted) is dropped and a new one is attested in the background, its enclave
launched ahead (``teeboost.tee.spare``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import secrets
import threading
import time

import numpy as np

from ..config import BoostParams
from ..core.split import SplitCriteria
from ..deploy.config import protocol_env
from ..deploy.tee_check import check_own_tee
from ..errors import ProtocolError
from ..policy import SealedRefusal
from ..protocols.env import enclave_code
from ..tee.spare import SpareEnclave
from .scorer import PeerUnavailable
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.ntee.hosts import attest_enclaves
from teeboost.protocols.online import OnlineSealed
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.strict.enclave.trainer import published_ensemble
from teeboost.protocols.strict.hosts import PROGRAM
from teeboost.transport import serde

__all__ = ["SealedRefusal", "SessionPending", "StrictOnlineActive"]


class SessionPending(PeerUnavailable):
    """A new enclave session is still being attested after a fault: this batch is not scored
    (failed fast, as for a party that is down), and the attestation goes on."""


class StrictOnlineActive:
    def __init__(self, scorer) -> None:
        self.scorer = scorer
        self.env = protocol_env(scorer.config)
        config = scorer.config
        check_own_tee(self.env, party=config.name, config=config.path, index=0, protocol="strict",
                      n_parties=1 + len(config.peers))
        self._enclave = None
        self._run_id = ""
        self._loaded: dict[int, str] = {}  # the id set version each passive enclave holds the table of
        self._lock = threading.Lock()
        self.sessions = 0  # attested so far (metrics)
        self._bounds: dict[int, int] = {}  # N-TEE: each passive party's path bound
        self._pending: concurrent.futures.Future | None = None  # a session being attested after a fault
        self._pending_until = 0.0  # the last moment a batch waits for it
        code = enclave_code(PROGRAM, self.env.trusted_roots, self.env.options)
        self._spare = SpareEnclave(lambda: self.env.backend().load(code, label="active"), name="active")

    def _session(self, versions: dict[int, str]):
        """The session's enclave, attested (and every passive enclave given its table) over
        the setup channel, whose timeout allows for loading a million rows; requests then go
        over the short-timeout channel. The first session is waited for, as a connection is;
        one after a fault (a passive party restarted) is attested in the background, and
        batches wait for it until one ``[serving] timeout`` after it began, then fail fast
        (``SessionPending``: the service falls back meanwhile; a recovery once held a request
        3.1 s for it). A passive party whose id set changed since is given its new table over
        the setup channel first (within a request's timeout, the load of a million rows failed
        the request and cost the session)."""
        if self._enclave is None:
            fresh = self._attested(versions) if self.sessions == 0 else self._recovered(versions)
            self._enclave, self._run_id, self._loaded = fresh
            self.sessions += 1
        if versions != self._loaded:
            changed = {p: v for p, v in versions.items() if self._loaded.get(p) != v}
            self.scorer.setup_sessions.long().request_all(
                {p: OnlineSealed(self._run_id, self.scorer.digest, v, b"") for p, v in changed.items()})
            self._loaded = dict(versions)
        return self._enclave

    def _recovered(self, versions: dict[int, str]):
        """A new session attested off the request path: -> it, once ready within the timeout."""
        if self._pending is None:
            self._pending = concurrent.futures.Future()
            self._pending_until = time.monotonic() + self.scorer.timeout
            threading.Thread(target=self._attest_into, args=(self._pending, versions), daemon=True,
                             name="teeboost-online-session").start()
        try:  # batches queued behind one that waited do not wait again: until one timeout after the start
            fresh = self._pending.result(timeout=max(0.0, self._pending_until - time.monotonic()))
        except concurrent.futures.TimeoutError:
            # kept, even if it ends this instant: the next batch takes it (dropped here, it once
            # leaked its enclave and started another attestation: red team)
            raise SessionPending(", ".join(c.name for c in self.scorer.caches.values()),
                                 "its enclave session is being attested again (after a fault); "
                                 "the next requests are scored once it is") from None
        except BaseException:
            self._pending = None  # it failed: the next batch attests again
            raise
        self._pending = None
        return fresh

    def _attest_into(self, future: concurrent.futures.Future, versions: dict[int, str]) -> None:
        try:
            future.set_result(self._attested(versions))
        except BaseException as exc:  # noqa: BLE001 - raised in the batch that waits for it
            future.set_exception(exc)

    def _attested(self, versions: dict[int, str]):
        """-> (enclave, run id, table versions loaded) of a new attested session."""
        params = BoostParams()
        env = dataclasses.replace(self.env, run_id=f"online.{secrets.token_hex(16)}")
        # a transport session of its own: the passive party keys a handshake under way by it, and
        # one dropped by ``reset`` while it ran must not meet the next one there (red team)
        setup = self.scorer.setup_sessions.dedicated()
        try:
            enclave = attest_enclaves(PROGRAM, "strict", setup, SplitCriteria.from_params(params), params.max_bin,
                                      env, enclave=self._spare.take())
            try:
                self._given_model(enclave)
                # an empty record: load the table now, not within a request's timeout
                setup.request_all({p: OnlineSealed(env.run_id, self.scorer.digest, v, b"")
                                   for p, v in versions.items()})
            except BaseException:
                enclave.close()
                raise
        finally:
            setup.close()
        return enclave, env.run_id, dict(versions)

    def _given_model(self, enclave) -> None:
        """The published trees (gains, sizes and covers zeroed, as strict saves them): what the
        passive party's records are bound to, for every protocol."""
        model = self.scorer.model
        enclave.ecall("online_model", serde.encode(om.StrictOnlineModel(
            json.dumps(published_ensemble(model.ensemble)), *sm.record_arrays(model.owner),
            self.scorer.protocol == "ntee")))

    def margin(self, channel, raw: np.ndarray, handles: dict[int, np.ndarray], versions: dict[int, str],
               requests: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """-> (margins, the rows a passive enclave refused for their budget, why). ``requests``:
        each row's request (0, 1, ...): a request with a row over budget is refused, its
        neighbours in the micro-batch scored, in one exchange its passive host cannot tell from
        any other (scored again one by one, a refused batch showed it the split: red team)."""
        with self._lock:
            enclave = self._session(versions)
            parties = sorted(handles)
            sealed = unpack_records(enclave.ecall("online_begin", serde.encode(om.StrictOnlineBatch(
                np.ascontiguousarray(raw, dtype=np.float64), np.array(parties, dtype=np.int64),
                np.stack([handles[p] for p in parties]).astype(np.int64),
                np.array([self.scorer.caches[p].n_ids for p in parties], dtype=np.int64),
                np.ascontiguousarray(requests, dtype=np.int64)))))
            digest = self.scorer.digest
            clear = self.scorer.protocol == "ntee"  # the passive host charges the rows it is told
            outputs = self.scorer.model.ensemble.n_outputs if clear else 0
            replies = channel.request_all({p: OnlineSealed(self._run_id, digest, versions[p], r, outputs,
                                                           self._path_bits(p) if clear else 0,
                                                           handles[p] if clear else np.zeros(0, np.int64))
                                           for p, r in sealed.items()})
            answers = {}
            for party, reply in replies.items():
                if not isinstance(reply, OnlineSealed) or reply.run_id != self._run_id:
                    raise ProtocolError(f"passive party {party} did not answer the strict online record")
                answers[party] = reply.record
            out = serde.decode(enclave.ecall("online_finish", pack_records(answers)))
            if isinstance(out, om.StrictOnlineRefusal):
                cache = self.scorer.caches.get(out.party)
                raise SealedRefusal(cache.name if cache is not None else f"passive-{out.party}", out.rule,
                                    out.detail.rstrip())
            if not isinstance(out, om.StrictOnlineMargins) or out.refused.shape != (raw.shape[0],):
                raise ProtocolError(f"the enclave sent {type(out).__name__}, expected StrictOnlineMargins")
            if not out.refused.any():
                return out.margin, out.refused, ""
            cache = self.scorer.caches.get(out.party)
            name = cache.name if cache is not None else f"passive-{out.party}"
            return out.margin, out.refused, str(SealedRefusal(name, "max_bits_per_row_per_day", out.detail))

    def _path_bits(self, party: int) -> int:
        """What the active enclave computes and seals for ``party`` (its enclave checks the two agree)."""
        if party not in self._bounds:
            self._bounds[party] = self.scorer.trees.path_nodes(party)
        return self._bounds[party]

    def reset(self) -> None:
        """The session is dropped; one still being attested is closed when it is done (it lived
        on transport sessions that were replaced)."""
        with self._lock:
            if self._enclave is not None:
                self._enclave.close()
                self._enclave, self._loaded = None, {}
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.add_done_callback(_close_unused)

    def close(self) -> None:
        self.reset()
        self._spare.close()


def _close_unused(future: concurrent.futures.Future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result()[0].close()
