"""What a long-running party process does about its own resources: give freed heap pages
back to the OS after large messages, and raise its open file limit (many connections)."""

from __future__ import annotations

import ctypes
import sys
from typing import Callable

__all__ = ["release_memory", "raise_open_file_limit"]

_libc_trim: Callable[[int], int] | None | bool = False  # False: not looked up yet


def release_memory() -> None:
    """Give freed heap pages back to the OS (glibc ``malloc_trim(0)``; a no-op elsewhere).
    Without it, the arenas that held a large message stay mapped after it is freed."""
    global _libc_trim
    if _libc_trim is False:
        try:
            _libc_trim = ctypes.CDLL("libc.so.6").malloc_trim if sys.platform.startswith("linux") else None
        except (OSError, AttributeError):
            _libc_trim = None
    if _libc_trim is not None:
        try:
            _libc_trim(0)
        except Exception:  # noqa: BLE001 - best effort
            pass


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; (before, after)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return (-1, -1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            target = soft
        return soft, target
    return soft, soft
