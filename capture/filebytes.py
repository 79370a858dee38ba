"""The bytes of a capture file as a ``uint8`` array the numba record walks can read.

Both are read in chunks: ``refill(pos)`` drops the bytes before ``pos``, appends the next chunk
and makes ``pos`` the new start (so a record cut by a chunk boundary is completed). A plain file is
read, not memory-mapped, so a file cut while it is replayed ends the replay with a warning instead
of a SIGBUS; a gzip file is decompressed. A gzip stream that ends early is treated as the end of
the file plus a warning; corrupt gzip data or a plain file that shrank sets ``cut`` (the replay
read only part of the file).
"""
from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 22


class FileBytes:
    """A plain file read ``CHUNK`` bytes at a time into an array (never mapped: a mapped file that
    shrinks under the walk kills the process with SIGBUS, a read just returns fewer bytes).
    ``refill(pos)`` keeps the bytes from ``pos`` on (a record cut by the chunk boundary) and
    appends the next chunk; ``base`` is the file offset of ``buf[0]``. A file that ends before
    the size it had when opened was cut under the replay: ``warning`` says so and ``cut`` is set."""

    compressed = False

    def __init__(self, path: Path, file=None):
        self.path = path
        self._file = open(path, "rb") if file is None else file
        self.size = os.fstat(self._file.fileno()).st_size
        self._file.seek(0)
        self.buf = np.zeros(0, np.uint8)
        self.base = 0
        self.warning: str | None = None
        self.cut = False
        self._read = 0  # file bytes read so far
        self._whole = self._spare = self.buf  # the array ``buf`` is part of, and the other one
        self.refill(0)

    def refill(self, pos: int) -> bool:
        """Make more bytes available after ``buf[pos:]``; False at end of file."""
        left = len(self.buf) - pos
        out = self._spare if len(self._spare) >= left + CHUNK else np.empty(left + CHUNK, np.uint8)
        out[:left] = self.buf[pos:]
        try:
            got = self._file.readinto(memoryview(out)[left:])
        except OSError as exc:  # an I/O error mid-file: the end of what can be read
            got = 0
            self.warning, self.cut = f"{self.path}: read error at byte {self._read} ({exc.strerror or exc})", True
        if not got:
            if self._read < self.size and self.warning is None:
                self.cut = True
                self.warning = (f"{self.path}: the file shrank to {self._read} bytes during the replay (it had "
                                f"{self.size}); the replay ends there")
            return False
        self._read += got
        self.base += pos
        self._spare, self._whole = self._whole, out  # two arrays in turn: no fresh pages per chunk
        self.buf = out[:left + got]
        return True

    def done(self, pos: int) -> int:
        """File bytes consumed when the walk is at ``buf[pos]`` (for progress)."""
        return self.base + pos

    def close(self) -> None:
        self.buf = self._whole = self._spare = np.zeros(0, np.uint8)
        self._file.close()


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
        self.cut = False
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
            self._eof, self.cut = True, True
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
            return FileBytes(path, f)  # closes f when it closes
        except BaseException:
            f.close()
            raise
    except (IsADirectoryError, PermissionError, FileNotFoundError) as exc:
        raise error(f"{path}: cannot read capture file ({exc.strerror or exc})") from exc
