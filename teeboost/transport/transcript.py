"""The active party's recorded view: every message it sent or received, plus its own notes.

Attack code reads only these files, never another party's state. A transcript is a
sequence of records ``u8 kind | u32 peer | u64 length | frame`` after a magic line; frames
are ordinary serde frames, so the reader decodes with the same checks as the network.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from ..errors import DataError
from . import serde

__all__ = ["TranscriptWriter", "read_transcript", "TranscriptRecord", "SENT", "RECEIVED", "NOTE"]

MAGIC = b"TEEBOOST-TRANSCRIPT-1\n"
_RECORD = struct.Struct("<BIQ")
SENT, RECEIVED, NOTE = 0, 1, 2
_KIND_NAMES = {SENT: "sent", RECEIVED: "received", NOTE: "note"}


@dataclass(frozen=True)
class TranscriptRecord:
    kind: int
    peer: int  # party index of the other side (0 for the active party's own notes)
    message: Any

    @property
    def kind_name(self) -> str:
        return _KIND_NAMES[self.kind]


class TranscriptWriter:
    """Appends records to a file; written to ``path.partial`` and renamed on close, so a
    failed run never leaves a transcript that looks complete. A run resumed from a
    checkpoint continues the partial file from the offset the checkpoint recorded."""

    def __init__(self, path: str | Path, *, resume_at: int | None = None) -> None:
        self.path = Path(path)
        self._partial = self.path.with_name(self.path.name + ".partial")
        if resume_at is None:
            self._file: BinaryIO | None = open(self._partial, "wb")
            self._file.write(MAGIC)
            return
        try:
            self._file = open(self._partial, "r+b")
        except OSError as exc:
            raise DataError(f"cannot continue transcript {self._partial}: {exc.strerror}") from None
        size = self._file.seek(0, 2)
        self._file.seek(0)
        if self._file.read(len(MAGIC)) != MAGIC or not len(MAGIC) <= resume_at <= size:
            self._file.close()
            raise DataError(f"{self._partial} does not match the checkpoint (shorter than its recorded "
                            f"{resume_at} bytes, or not a transcript)")
        self._file.truncate(resume_at)
        self._file.seek(resume_at)

    def offset(self) -> int:
        """Bytes written so far, flushed to disk (recorded in checkpoints)."""
        if self._file is None:
            raise ValueError("transcript already closed")
        self._file.flush()
        os.fsync(self._file.fileno())
        return self._file.tell()

    def record(self, kind: int, peer: int, frame: bytes) -> None:
        if self._file is None:
            raise ValueError("transcript already closed")
        self._file.write(_RECORD.pack(kind, peer, len(frame)))
        self._file.write(frame)

    def note(self, message: Any) -> None:
        """The active party's own knowledge (its gradients, its trees)."""
        self.record(NOTE, 0, serde.encode(message))

    def close(self, *, complete: bool = True, keep_partial: bool = False) -> None:
        if self._file is None:
            return
        self._file.close()
        self._file = None
        if complete:
            self._partial.replace(self.path)
        elif not keep_partial:
            self._partial.unlink(missing_ok=True)


def read_transcript(path: str | Path) -> Iterator[TranscriptRecord]:
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise DataError(f"cannot read transcript {path}: {exc.strerror}") from None
    with handle:
        if handle.read(len(MAGIC)) != MAGIC:
            raise DataError(f"{path} is not a teeboost transcript")
        while True:
            head = handle.read(_RECORD.size)
            if not head:
                return
            if len(head) != _RECORD.size:
                raise DataError(f"{path}: truncated record header")
            kind, peer, length = _RECORD.unpack(head)
            frame = handle.read(length)
            if len(frame) != length or kind not in _KIND_NAMES:
                raise DataError(f"{path}: truncated or corrupt record")
            yield TranscriptRecord(kind, peer, serde.decode(frame))
