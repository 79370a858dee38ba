"""The starting phase says "compiling kernels" only when numba really compiles one: a kernel
loaded from the cache fires no compile event (``dptop.engine.core.jit.compiles``)."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time

import numba

from dptop.engine.core import jit
from dptop.monitor import session as session_module
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import COMPILING, Session
from dptop.monitor.states import Lifecycle, State
from tests.conftest import DNS_CAPTURE


class RecordingLifecycle(Lifecycle):
    """A session's lifecycle that keeps every phase it passes through."""

    def __setattr__(self, name, value):
        if name == "phase":
            self.__dict__.setdefault("phases", []).append(value)
        super().__setattr__(name, value)


def run_to_end(monkeypatch, counts) -> list[str]:
    """The phases of a replay whose kernel warm-up takes 0.2 s, with ``counts`` as the compile counter."""
    from dptop.engine.baselines.exact import Exact

    warm_up = Exact.warm_up
    monkeypatch.setattr(Exact, "warm_up", lambda self: (time.sleep(0.2), warm_up(self)))
    monkeypatch.setattr(session_module, "compiles", lambda: next(counts))
    session = Session(RunConfig(("exact",)))
    session.life = RecordingLifecycle()
    try:
        session.open(SourceSpec("file", str(DNS_CAPTURE)))
        deadline = time.monotonic() + 120
        while not session.state.ended and time.monotonic() < deadline:
            time.sleep(0.02)
        assert session.state == State.FINISHED, session.error
        return session.life.phases
    finally:
        assert session.close(1.0) == []


def test_a_new_function_counts_as_compiled_and_a_compiled_one_does_not():
    before = jit.compiles()

    @numba.njit
    def add_one(x):
        return x + 1

    assert add_one(1) == 2 and jit.compiles() > before
    after = jit.compiles()
    assert add_one(2) == 3 and jit.compiles() == after


def test_the_phase_names_compiling_only_when_a_kernel_compiles(monkeypatch):
    def constant():
        while True:
            yield 7

    def rising():
        n = 7
        while True:
            yield n
            n += 1

    cached = run_to_end(monkeypatch, constant())
    assert COMPILING not in cached and "starting the algorithms..." in cached, cached
    assert COMPILING in run_to_end(monkeypatch, rising())


def test_a_long_start_is_never_silent_for_more_than_a_few_seconds(monkeypatch):
    """``Progress`` repeats a phase that lasts every ``PHASE_EVERY`` seconds with its age, and says
    kernels are compiling once numba compiles one during it (a first use since install)."""
    import io
    from types import SimpleNamespace

    from dptop import headless
    from dptop.monitor.config import RunConfig

    clock = iter(float(t) for t in range(0, 100))
    monkeypatch.setattr(headless.time, "monotonic", lambda: next(clock))
    compiled = iter([0, 0, 3, 3, 3])  # at the start, then at each repeated line
    monkeypatch.setattr(headless, "compiles", lambda: next(compiled))
    fake = SimpleNamespace(phase="counting packets", source_stats=lambda: None, config=RunConfig(("dpss",)))
    out = io.StringIO()
    progress = headless.Progress(fake, out, mode="always")  # a StringIO is no terminal
    for _ in range(14):  # one update a second: lines at 1, 6 and 11 s
        progress.update()
    lines = out.getvalue().splitlines()
    assert lines[0] == "dptop: counting packets"
    assert lines[1] == "dptop: counting packets, 5 s"
    assert lines[2] == "dptop: counting packets: compiling kernels (first use since install), 10 s", lines
    assert len(lines) == 3


def test_a_change_to_any_kernel_source_names_a_new_cache_folder(tmp_path):
    """Numba reloads a cached kernel after a change to a helper inlined from another file; the
    cache folder is named by a digest of every source, so any change compiles everything anew."""
    import shutil
    from pathlib import Path

    engine = Path(jit.__file__).resolve().parents[1]
    shutil.copytree(engine, tmp_path / "engine")
    shutil.copytree(engine.parent / "capture", tmp_path / "capture")
    before = jit.sources_digest(tmp_path / "engine")
    assert before == jit.sources_digest(tmp_path / "engine")
    with open(tmp_path / "capture" / "wire.py", "a") as f:
        f.write("\n# a helper changed\n")
    assert jit.sources_digest(tmp_path / "engine") != before


def test_cache_folders_of_other_sources_unused_for_a_week_are_removed(tmp_path):
    current, recent, stale, other = (tmp_path / n for n in ("0" * 16, "1" * 16, "2" * 16, "notes"))
    for folder in (recent, stale, other):
        folder.mkdir()
    week = jit.STALE_DAYS * 86400
    os.utime(stale, (time.time() - week - 60,) * 2)
    os.utime(other, (time.time() - week - 60,) * 2)
    jit.prune(current)
    assert current.is_dir() and recent.is_dir() and other.is_dir() and not stale.exists()



def test_importing_the_kernels_leaves_other_cache_folders_alone_and_compile_tidies_them(tmp_path, monkeypatch):
    """Importing the decorators does no housekeeping: a week-old folder of other sources survives a
    fresh interpreter's import and goes at ``dptop compile`` (``compile_kernels``)."""
    import subprocess
    import sys

    from dptop.kernels import compile_kernels

    stale = tmp_path / ("2" * 16)
    stale.mkdir()
    old = time.time() - jit.STALE_DAYS * 86400 - 60
    os.utime(stale, (old, old))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    code = "from dptop.engine.core import jit; print(jit.cache_dir())"
    folder = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert stale.is_dir() and folder == str(jit.cache_dir())
    assert compile_kernels([], progress=lambda line: None) == []
    assert not stale.exists() and jit.cache_dir().is_dir()
