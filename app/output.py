"""Outputs written whole or not at all: ``--json OUT|-`` of every command.

A file target is written to a temporary file beside it and renamed over it once complete, so a
run that fails, is killed or fills the disk leaves a previous file as it was (and never a
truncated one). ``JsonOut(target)`` creates that temporary file at once (one byte written: a
missing folder, a permission or a full device fails before the run), ``write`` fills and renames
it, ``close`` removes it when nothing was written. A target that is not a regular file (``-``,
``/dev/null``, a pipe) is written in one go. A reader that closed the pipe (``| head``) is
``OutputError``, one line for the user; stdout is then pointed at ``/dev/null`` so that Python's
final flush adds no second message.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


class OutputError(OSError):
    """An output could not be written; the message names it and why."""


def dump(result) -> str:
    return json.dumps(result, indent=2, default=str) + "\n"


class JsonOut:
    def __init__(self, target: str | None, what: str = "the JSON"):
        self.what = what  # how messages name this output ("the JSON", "the private view")
        self.target, self.tmp, self.fh, self.closed = target, None, None, False
        self.stream = target == "-" or (target is not None and os.path.exists(target) and not os.path.isfile(target))
        if target is None or target == "-":
            return
        if self.stream:  # /dev/null, a device, a named pipe: opened (and probed) now, written in one go
            try:
                self.fh = open(target, "wb")
                write_all(self.fh, b"\n")
            except OSError as exc:
                self.close()
                raise OutputError(f"cannot write {what} to {target}: {exc.strerror or exc}") from None
            return
        folder = Path(target).resolve().parent
        try:
            for attempt in range(100):
                tmp = folder / f".{Path(target).name}.{os.getpid()}.{attempt}.tmp"
                try:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError(f"no free temporary name beside {target}")
            self.tmp, self.fh = tmp, os.fdopen(fd, "w")
            self.fh.write("\n")
            self.fh.flush()
        except OSError as exc:
            self.close()
            raise OutputError(f"cannot write {what} to {target}: {exc.strerror or exc}") from None

    def write(self, result) -> None:
        """Write ``result`` whole (rename into place) or raise ``OutputError`` leaving the target as it was."""
        if self.target is None or self.closed:  # closed: the run failed, nothing is written
            return
        if self.stream:
            try:
                write_stream(dump(result), self.target, self.fh, self.what)
            finally:
                self.close()
            return
        text = dump(result)
        try:
            self.fh.seek(0)
            self.fh.truncate()
            self.fh.write(text)
            self.fh.flush()
            os.fsync(self.fh.fileno())
            self.fh.close()
            os.replace(self.tmp, self.target)
            self.tmp = None
        except OSError as exc:
            raise OutputError(f"cannot write {self.what} to {self.target}: {exc.strerror or exc}; "
                              f"{'the previous file is unchanged' if os.path.exists(self.target) else 'nothing written'}"
                              ) from None
        finally:
            self.close()

    def close(self) -> None:
        """Drop the temporary file if it was not renamed into place; nothing is written after."""
        self.closed = True
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass
            self.fh = None
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


def write_stream(text: str, target: str, fh=None, what: str = "the JSON") -> None:
    """``text`` to stdout (``-``) or to ``fh``, the open ``target`` that is not a regular file."""
    try:
        if fh is None:
            sys.stdout.flush()
            fh = sys.stdout.buffer
        write_all(fh, text.encode())
    except BrokenPipeError:
        silence_stdout()
        raise OutputError(f"cannot write {what} to {'stdout' if target == '-' else target}: "
                          f"the reader closed the pipe") from None
    except OSError as exc:
        raise OutputError(f"cannot write {what} to {target}: {exc.strerror or exc}") from None


def write_all(stream, data: bytes) -> None:
    """Write all of ``data``: a buffered stream on a pipe may take only part of it and report the
    closed pipe on the next call only (the text layer drops the count, so the rest is lost
    silently)."""
    view = memoryview(data)
    while view:
        view = view[stream.write(view):]
    stream.flush()


def write_json(result, target: str) -> None:
    """``result`` as JSON to ``target`` (a file, or ``-`` for stdout), whole or not at all."""
    out = JsonOut(target)
    try:
        out.write(result)
    finally:
        out.close()


def silence_stdout() -> None:
    """Point stdout at /dev/null (after a closed pipe), so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
