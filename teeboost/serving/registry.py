"""The served models: several names, several versions of a name, swapped without a failed request.

A model name maps to one or more directories; each holds one version (``scorer.version``, the
model digest's prefix), the first answering the requests that pin none. ``reload()`` looks at
every directory: one whose files changed is loaded fully, checked (its fallback still fits),
and only then put in place with one reference swap under a lock. A request holds the version
it started on until it ends (``use``): the replaced scorer keeps answering its in-flight
requests and is closed after the last one, so no request fails or changes model midway. A
directory that fails to load keeps its old version serving, and the reload says why.

A directory should change atomically (a symlink switched to a new directory, or files
renamed into place, as ``teeboost train`` writes them); files that change while being loaded
are read again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..errors import ConfigError
from ..model_files import ACTIVE_FILE
from .fallback import ON_UNMATCHED, check_fallback
from .scorer import Scorer

__all__ = ["ModelSpec", "Loaded", "Registry", "UnknownModel", "VersionNotLoaded", "MODEL_NAME", "fingerprint"]

log = logging.getLogger("teeboost.serving")

#: What a served model may be called (it is a metric label and a URL-safe word).
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class UnknownModel(LookupError):
    def __init__(self, name: str, served: list[str]) -> None:
        super().__init__(f"model {name!r} is not served here (served: {', '.join(served)})")
        self.name = name


class VersionNotLoaded(LookupError):
    def __init__(self, name: str, version: str, loaded: list[str]) -> None:
        super().__init__(f"model {name!r} has no version {version!r} loaded (loaded: {', '.join(loaded)}); leave "
                         "version out for the current one")


@dataclass(frozen=True)
class ModelSpec:
    """A served model: its versions' directories (the first answers requests that pin no
    version), what its unscored rows get, and the served model it falls back to."""

    name: str
    directories: tuple[Path, ...]
    on_unmatched: str = "error"
    fallback: str | None = None

    def __post_init__(self) -> None:
        if not MODEL_NAME.match(self.name):
            raise ConfigError(f"model name {self.name!r} may use letters, digits, '.', '_' and '-' (at most 64)")
        if not self.directories:
            raise ConfigError(f"model {self.name!r}: give its directory")
        if self.on_unmatched not in ON_UNMATCHED:
            raise ConfigError(f"model {self.name!r}: on_unmatched = {self.on_unmatched!r} must be one of "
                              f"{', '.join(ON_UNMATCHED)}")
        if self.on_unmatched == "fallback" and self.fallback is None:
            raise ConfigError(f"model {self.name!r}: on_unmatched = 'fallback' needs a fallback model "
                              "(--fallback NAME=DIR, or [serving] fallback_model)")


@dataclass
class Loaded:
    """One loaded version: its scorer, where it came from, and who is using it."""

    scorer: Scorer
    directory: Path
    fingerprint: str
    loaded_at: float = field(default_factory=time.time)
    in_flight: int = 0
    retired: bool = False


def fingerprint(directory: Path) -> str:
    """SHA-256 of a model directory's model files (``active.json``, ``passive-N.json``: names
    and contents; anything else there, such as checkpoints, left out): what tells a reload
    that the model changed."""
    digest = hashlib.sha256()
    root = directory.resolve()
    for path in sorted(root.iterdir()):
        if path.is_file() and (path.name == ACTIVE_FILE or re.fullmatch(r"passive-\d+\.json", path.name)):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class Registry:
    """Every served model's loaded versions. ``load(name, directory)`` makes a scorer."""

    def __init__(self, specs: list[ModelSpec], load: Callable[[str, Path], Scorer]) -> None:
        names = [s.name for s in specs]
        if not specs:
            raise ConfigError("no model to serve: give --model NAME=DIR (or [serving] models)")
        if len(set(names)) != len(names):
            raise ConfigError(f"model {next(n for n in names if names.count(n) > 1)!r} is given twice; list its "
                              "versions' directories under one name")
        for spec in specs:
            if spec.fallback is not None and spec.fallback not in names:
                raise ConfigError(f"model {spec.name!r}: its fallback {spec.fallback!r} is not a served model "
                                  f"(served: {', '.join(names)})")
        self.specs = {s.name: s for s in specs}
        self._load = load
        self._state = threading.Lock()  # guards _slots and every Loaded's in_flight/retired
        self._reloading = threading.Lock()
        self._slots: dict[str, list[Loaded]] = {}
        self._retired: list[Loaded] = []
        try:
            for spec in self._fallbacks_first():
                self._slots[spec.name] = [self._load_one(spec.name, d) for d in spec.directories]
                self._check_versions(spec.name, self._slots[spec.name])
                self._check(spec.name, self._slots)
        except BaseException:
            self.close()
            raise

    def _fallbacks_first(self) -> list[ModelSpec]:
        fallbacks = {s.fallback for s in self.specs.values() if s.fallback}
        return sorted(self.specs.values(), key=lambda s: s.name not in fallbacks)

    def _load_one(self, name: str, directory: Path) -> Loaded:
        if not directory.is_dir():
            raise ConfigError(f"model {name!r}: {directory} is not a directory")
        for _ in range(3):
            before = fingerprint(directory)
            scorer = self._load(name, directory)
            if fingerprint(directory) == before:
                return Loaded(scorer, directory, before)
            scorer.close()  # its files changed while it loaded: read them again
        raise ConfigError(f"model {name!r}: the files in {directory} kept changing while they were read; replace a "
                          "model directory atomically (a symlink switch) and reload again")

    @staticmethod
    def _check_versions(name: str, loaded: list[Loaded]) -> None:
        versions = [x.scorer.version for x in loaded]
        for k, v in enumerate(versions):
            if v in versions[:k]:
                raise ConfigError(f"model {name!r}: {loaded[k].directory} holds the same model (version {v}) as "
                                  f"{loaded[versions.index(v)].directory}")

    def _check(self, name: str, slots: dict[str, list[Loaded]]) -> None:
        """``name``'s versions still fit its fallback, and every model falling back to it."""
        spec = self.specs[name]
        if spec.fallback is not None and spec.fallback in slots:
            for x in slots[name]:
                check_fallback(x.scorer, slots[spec.fallback][0].scorer)
        for other in self.specs.values():
            if other.fallback == name and other.name in slots:
                for x in slots[other.name]:
                    check_fallback(x.scorer, slots[name][0].scorer)

    # -- serving requests -------------------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self.specs)

    def _pick(self, name: str, version: str | None) -> Loaded:
        if name not in self._slots:
            raise UnknownModel(name, self.names())
        loaded = self._slots[name]
        if version is None:
            return loaded[0]
        for x in loaded:
            if x.scorer.version == version:
                return x
        raise VersionNotLoaded(name, version, [x.scorer.version for x in loaded])

    @contextmanager
    def use(self, name: str, version: str | None = None) -> Iterator[tuple[ModelSpec, Loaded, Loaded | None]]:
        """The model version a request runs on (and its fallback's current version), held until
        the request ends: a reload meanwhile swaps them for later requests only."""
        with self._state:
            main = self._pick(name, version)
            spec = self.specs[name]
            fallback = self._slots[spec.fallback][0] if spec.fallback else None
            held = [x for x in (main, fallback) if x is not None]
            for x in held:
                x.in_flight += 1
        try:
            yield spec, main, fallback
        finally:
            done = []
            with self._state:
                for x in held:
                    x.in_flight -= 1
                    if x.retired and x.in_flight == 0 and x in self._retired:
                        self._retired.remove(x)
                        done.append(x)
            for x in done:
                _close(x)

    # -- reloading --------------------------------------------------------------------------------

    def reload(self) -> list[dict]:
        """Load every directory whose files changed and swap it in; one entry per directory:
        ``{"model", "directory", "status": "unchanged" | "reloaded" | "failed", "version", ...}``."""
        results = []
        with self._reloading:
            for spec in self._fallbacks_first():
                for k, directory in enumerate(spec.directories):
                    results.append(self._reload_one(spec, k, directory))
        return results

    def _reload_one(self, spec: ModelSpec, k: int, directory: Path) -> dict:
        old = self._slots[spec.name][k]
        entry = {"model": spec.name, "directory": str(directory), "version": old.scorer.version}
        try:
            if fingerprint(directory) == old.fingerprint:
                return {**entry, "status": "unchanged"}
            new = self._load_one(spec.name, directory)
        except Exception as exc:  # a broken directory must not stop the service: the old version serves on
            log.error("reload of model %r from %s failed: %s", spec.name, directory, exc)
            return {**entry, "status": "failed", "error": str(exc)}
        trial = {**self._slots, spec.name: [*self._slots[spec.name]]}
        trial[spec.name][k] = new
        try:
            self._check_versions(spec.name, trial[spec.name])
            self._check(spec.name, trial)
        except ConfigError as exc:
            _close(new)
            log.error("reload of model %r from %s refused: %s", spec.name, directory, exc)
            return {**entry, "status": "failed", "error": str(exc)}
        with self._state:
            self._slots[spec.name][k] = new
            old.retired = True
            idle = old.in_flight == 0
            if not idle:
                self._retired.append(old)
        if idle:
            _close(old)
        log.info("model %r: version %s replaced by %s (from %s)", spec.name, old.scorer.version, new.scorer.version,
                 directory)
        return {**entry, "status": "reloaded", "version": new.scorer.version, "previous": old.scorer.version}

    # -- describing -------------------------------------------------------------------------------

    def snapshot(self) -> list[tuple[ModelSpec, list[Loaded], list[Loaded]]]:
        """Each model's loaded versions and its replaced versions still finishing requests."""
        with self._state:
            return [(spec, list(self._slots[spec.name]), [x for x in self._retired if x.scorer.name == spec.name])
                    for spec in self.specs.values() if spec.name in self._slots]

    def in_flight(self) -> list[tuple[str, str, int]]:
        with self._state:
            every = [x for slots in self._slots.values() for x in slots] + self._retired
            return [(x.scorer.name, x.scorer.version, x.in_flight) for x in every]

    def close(self) -> None:
        with self._state:
            every = [x for slots in self._slots.values() for x in slots] + self._retired
            self._slots, self._retired = {}, []
        for x in every:
            _close(x)


def _close(loaded: Loaded) -> None:
    try:
        loaded.scorer.close()
    except Exception:  # closing must not fail a request or a reload; say so and go on
        log.exception("closing model %r version %s failed", loaded.scorer.name, loaded.scorer.version)
