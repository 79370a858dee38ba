"""A plain install (no extras) replays files; each command that needs an extra says which, in one
line, before it starts. The extras' modules are made unimportable in a child interpreter
(``sys.modules[name] = None``), which is what an install without them looks like to ``import``."""
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import DNS_CAPTURE

ROOT = Path(__file__).resolve().parents[1]
EXTRA_MODULES = ("PySide6", "shiboken6", "pyqtgraph", "scapy", "dask", "distributed", "prometheus_client")


def _dptop(*argv, block=EXTRA_MODULES, display=None):
    code = ("import sys\n"
            f"sys.modules.update(dict.fromkeys({list(block)!r}))\n"
            "from dptop.cli import main\n"
            f"code = main({list(argv)!r})\n"
            f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {list(block)!r} and sys.modules[m] is not None)\n"
            "print('LOADED', loaded, file=sys.stderr)\n"
            "sys.exit(code)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if display:
        env["DISPLAY"] = display
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


def test_core_dependencies_leave_out_the_window_the_live_capture_and_the_cluster():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for module in ("pyside6", "pyqtgraph", "scapy", "dask", "distributed", "prometheus"):
        assert module not in core, module
    extras = project["optional-dependencies"]
    assert any("PySide6" in d for d in extras["gui"]) and any("pyqtgraph" in d for d in extras["gui"])
    assert any("scapy" in d for d in extras["live"])
    assert any("distributed" in d for d in extras["cluster"])


def test_a_replay_runs_without_any_extra():
    run = _dptop("replay", str(DNS_CAPTURE), "--json", "-")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["algorithms"]
    assert "LOADED []" in run.stderr


def test_a_replay_of_several_files_runs_without_any_extra():
    run = _dptop("replay", str(DNS_CAPTURE), str(DNS_CAPTURE), "--algorithms", "misragries", "--json", "-")
    assert run.returncode == 0, run.stderr
    assert "LOADED []" in run.stderr


@pytest.mark.parametrize("argv, display, extra, module", [
    (("gui",), ":99", "gui", "PySide6"),
    (("capture", "--iface", "lo", "--duration", "1"), None, "live", "scapy"),
    (("replay", str(DNS_CAPTURE), str(DNS_CAPTURE), "--cluster", "local:2"), None, "cluster", "distributed"),
    (("replay", str(DNS_CAPTURE), str(DNS_CAPTURE), "--cluster", "tls://127.0.0.1:8786"), None, "cluster", "dask"),
    (("collect", "--scheduler", "tcp://127.0.0.1:8786"), None, "cluster", "dask"),
    (("replay", str(DNS_CAPTURE), "--serve", "0"), None, "feed", "prometheus_client"),
])
def test_a_command_needing_an_extra_names_it_in_one_line(argv, display, extra, module):
    run = _dptop(*argv, display=display)
    lines = [line for line in run.stderr.splitlines() if not line.startswith("LOADED")]
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith("dptop: error"), run.stderr
    assert module in lines[0] and f"pip install 'dptop[{extra}]'" in lines[0]
    assert run.stdout == ""


def test_the_check_passes_when_the_extra_is_installed():
    """The broken variant of the checks above: nothing blocked, the gui command gets past the check
    (no display: it falls back to the headless replay and says so)."""
    run = _dptop("gui", block=())
    assert run.returncode == 0, run.stderr
    assert "no display" in run.stderr and "pip install" not in run.stderr
