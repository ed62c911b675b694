"""Enclave code and its measurement (the MRENCLAVE analogue).

An enclave program is Python source defining ``ecall_<name>(runtime, payload) -> bytes``
functions. What an enclave loads is the program, the source of every ``teeboost`` module it
can import (found by following its import statements, package ``__init__`` files and the
runtime included) and a configuration. The measurement is SHA-256 over all of it, computed by
the loader over the bytes it runs (``tee.bootstrap.measure``), so one changed byte anywhere
changes it. Verifiers allow-list measurements, never names.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .bootstrap import PACKAGE, RUNTIME_MODULE, measure

__all__ = ["EnclaveCode", "import_closure", "module_source"]

_ROOT = Path(__file__).resolve().parent.parent  # the teeboost package directory


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = _ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def module_source(name: str) -> bytes:
    """The source of a teeboost module (an enclave program), read as the loader reads it."""
    path = _module_file(name)
    if path is None:
        raise ConfigError(f"enclave program {name!r} has no Python source in the teeboost package")
    return path.read_bytes()


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)  # where statements (imports) can be


def _walk_runtime(tree: ast.AST):
    """Every statement except those in ``if TYPE_CHECKING:`` blocks (never run); expressions
    hold no import statements and are not descended into."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS))


def _imports(source: bytes, module: str, is_package: bool) -> set[str]:
    """Absolute teeboost module names a source file may import (including ``from x import y``
    where ``x.y`` is a module)."""
    return {name for name in _imported_names(source, module, is_package) if _module_file(name) is not None}


@functools.lru_cache(maxsize=1024)
def _imported_names(source: bytes, module: str, is_package: bool) -> frozenset[str]:
    """Every name an import statement of the source names (parsed once per distinct source:
    each party of a run measures the same program)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _walk_runtime(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return frozenset(found)


def import_closure(program: bytes) -> dict[str, bytes]:
    """Every teeboost module the program can reach, with its parents and the runtime."""
    modules: dict[str, bytes] = {}
    pending = _imports(program, "teeboost_enclave_program", False) | {RUNTIME_MODULE}
    while pending:
        name = pending.pop()
        if name in modules:
            continue
        path = _module_file(name)
        if path is None:
            raise ConfigError(f"enclave module {name!r} has no Python source in the teeboost package")
        source = path.read_bytes()
        modules[name] = source
        pending |= _imports(source, name, path.name == "__init__.py")
        parts = name.split(".")
        pending |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return modules


@dataclass(frozen=True)
class EnclaveCode:
    """What an enclave loads: program source, measured module sources, configuration."""

    name: str
    program: bytes
    modules: dict[str, bytes]
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_source(cls, name: str, program: bytes, config: dict[str, Any] | None = None) -> "EnclaveCode":
        return cls(name, program, import_closure(program), dict(config or {}))

    @classmethod
    def from_file(cls, path: str | Path, *, config: dict[str, Any] | None = None,
                  name: str | None = None) -> "EnclaveCode":
        path = Path(path)
        return cls.from_source(name or path.stem, path.read_bytes(), config)

    @property
    def measurement(self) -> bytes:
        """The value to put on verifiers' allow-lists."""
        return measure(self.program, self.modules, self.config)
