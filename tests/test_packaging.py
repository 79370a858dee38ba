"""The wheel installs like a package: one top-level ``dptop`` with its bundled capture, the command
and ``python -m dptop`` work from a fresh virtualenv outside the repository (slow: builds and installs)."""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900, **kw)


@pytest.mark.slow
def test_wheel_installs_one_package_and_runs_the_demo_headless(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)])
    wheel = next(dist.glob("dptop-*.whl"))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    # The fresh venv borrows the heavy dependencies from this one through a path entry (not under
    # test here; a path entry does not run that folder's .pth files, so this checkout's editable
    # dptop stays out); dptop itself comes only from the wheel.
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([str(py), "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)])
    top = {p.name for p in site.iterdir()
           if p.is_dir() and not p.name.endswith((".dist-info", "__pycache__")) and not p.name.startswith("_")}
    assert "dptop" in top and not top & {"app", "engine", "capture", "resources"}, sorted(top)
    assert (site / "dptop" / "resources" / "demo.pcap.gz").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYTHONPATH")}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")  # a user cache, never site-packages
    listing = _run([str(py), "-m", "dptop", "list"], cwd=tmp_path, env=env).stdout
    assert "dpss" in listing and "``" not in listing
    demo = _run([str(venv / "bin" / "dptop"), "demo"], cwd=tmp_path, env=env)
    assert "no display" in demo.stderr.lower() or "no display" in demo.stdout.lower()
    assert "dpss" in demo.stdout
    assert any((tmp_path / "numba").rglob("*.nbi")), "numba cache was not written to NUMBA_CACHE_DIR"
    assert not list(site.rglob("*.nbi")), "numba wrote its cache into site-packages"
