"""The bytes of a capture file as a ``uint8`` array the numba record walks can read.

A plain file is memory-mapped whole (no copy, the page cache does the I/O). A gzip file is
decompressed in chunks: ``refill(pos)`` drops the bytes before ``pos``, appends the next chunk
and makes ``pos`` the new start (so a record cut by a chunk boundary is completed). A gzip
stream that ends early is treated as the end of the file plus a warning.
"""
from __future__ import annotations

import gzip
import mmap
import os
import zlib
from pathlib import Path

import numpy as np

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 22


RELEASE_BEHIND = 1 << 22
"""Bytes kept mapped behind the walk (``FileBytes.done``): records the caller may still slice."""


class FileBytes:
    """A whole file, memory-mapped copy-on-write (never written: "c" only gives the kernels the
    same writable array type as gzip chunks, so each walk compiles once). ``base`` is the file
    offset of ``buf[0]`` (always 0)."""

    compressed = False

    def __init__(self, path: Path, file=None):
        self.path = path
        self.size = os.path.getsize(path)
        source = path if file is None else file  # an open file is mapped as it is (no second open)
        self.buf = np.memmap(source, dtype=np.uint8, mode="c") if self.size else np.zeros(0, np.uint8)
        self.base = 0
        self.warning: str | None = None
        self._released = 0  # bytes at the start of the mapping already handed back (``done``)

    def refill(self, pos: int) -> bool:
        """Make more bytes available after ``buf[pos:]``; False at end of file."""
        return False

    def done(self, pos: int) -> int:
        """File bytes consumed when the walk is at ``buf[pos]`` (for progress). The pages behind
        ``pos`` are handed back to the kernel (they are never read again), so a replay's resident
        memory stays a window of the file instead of growing to the whole file."""
        mm = getattr(self.buf, "_mmap", None)
        cut = (pos - RELEASE_BEHIND) // mmap.PAGESIZE * mmap.PAGESIZE
        if mm is not None and cut > self._released:
            mm.madvise(mmap.MADV_DONTNEED, self._released, cut - self._released)
            self._released = cut
        return pos

    def close(self) -> None:
        mm = getattr(self.buf, "_mmap", None)
        self.buf = np.zeros(0, np.uint8)
        if mm is not None:
            mm.close()


class GzipBytes(FileBytes):
    """A gzip-compressed file, decompressed ``CHUNK`` bytes at a time."""

    compressed = True

    def __init__(self, path: Path, error, raw=None):
        self.path = path
        self.size = os.path.getsize(path)
        self._error = error
        self._raw = open(path, "rb") if raw is None else raw
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="rb")
        self.buf = np.zeros(0, np.uint8)
        self.base = 0
        self.warning = None
        self._eof = False
        self.refill(0)

    def refill(self, pos: int) -> bool:
        if self._eof:
            return False
        parts, got = [], 0
        try:
            while got < CHUNK:
                data = self._gz.read1(CHUNK - got)
                if not data:
                    self._eof = True
                    break
                parts.append(data)
                got += len(data)
        except EOFError:
            self._eof = True
            self.warning = f"{self.path}: gzip data ends early (the compressed file was cut off)"
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            if not parts:
                raise self._error(f"{self.path}: corrupt gzip data ({exc})") from exc
            self._eof = True
            self.warning = f"{self.path}: corrupt gzip data after this point ({exc})"
        if not parts:
            return False
        self.base += pos
        self.buf = np.concatenate([self.buf[pos:], np.frombuffer(b"".join(parts), np.uint8)])
        return True

    def done(self, pos: int) -> int:
        return self.size if self._eof else min(self._raw.tell(), self.size)

    def close(self) -> None:
        self._gz.close()
        self._raw.close()
        self.buf = np.zeros(0, np.uint8)


def open_bytes(path: Path, error) -> FileBytes:
    """``FileBytes`` or ``GzipBytes`` by the file's first bytes (not its name); ``error`` is
    the exception class to raise for unreadable files. The file is opened once."""
    try:
        f = open(path, "rb")
        try:
            if f.read(2) == GZIP_MAGIC:
                f.seek(0)
                return GzipBytes(path, error, f)  # closes f when it closes
            with f:  # the mapping keeps its own handle
                return FileBytes(path, f)
        except BaseException:
            f.close()
            raise
    except (IsADirectoryError, PermissionError, FileNotFoundError) as exc:
        raise error(f"{path}: cannot read capture file ({exc.strerror or exc})") from exc
