"""Layout checks beside import-linter's contracts (pyproject.toml, run by ``make test``):
the package list covers every folder, and importing the engine, capture and CLI loads no Qt."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "pyqtgraph", "shiboken6")


def _setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed():
    """A folder with an __init__.py that pyproject's package list misses would not be installed."""
    config = _setuptools_config()
    folders = {}
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            folders[".".join([package, *rel.parts])] = init.parent
    assert set(config["packages"]) == set(folders), (
        f"pyproject packages {sorted(config['packages'])} != folders {sorted(folders)}")


def test_headless_import_of_engine_capture_and_cli_loads_no_qt():
    code = (
        "import importlib, pkgutil, sys\n"
        "import dptop.engine, dptop.capture, dptop.cli\n"
        "for pkg in (dptop.engine, dptop.capture):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {QT!r}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_cli_and_gui_share_the_monitor_session():
    """Both views run a dptop.monitor Session (import-linter forbids them the runner itself)."""
    import ast

    def imports(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "dptop.monitor.session" in imports(ROOT / "app" / "headless.py")
    assert "dptop.monitor.session" in imports(ROOT / "app" / "gui" / "main.py")
    assert "dptop.monitor.private" in imports(ROOT / "app" / "gui" / "export.py")  # the one private-view builder
