"""Layering (HOUSE_STYLE.md): capture -> engine -> app. Only app/ imports Qt; engine never imports
app; capture never imports app. Checked on the source (AST) and by importing everything headless."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "pyqtgraph", "shiboken6")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package, forbidden", [
    ("engine", {"app", *QT}),
    ("capture", {"app", *QT}),
])
def test_layer_imports(package, forbidden):
    offenders = {str(p.relative_to(ROOT)): sorted(_imports(p) & forbidden)
                 for p in (ROOT / package).rglob("*.py") if _imports(p) & forbidden}
    assert not offenders, f"{package}/ must not import {sorted(forbidden)}: {offenders}"


def test_headless_import_of_engine_capture_and_cli_loads_no_qt():
    code = (
        "import importlib, pkgutil, sys\n"
        "import engine, capture, app.cli\n"
        "for pkg in (engine, capture):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(f'{pkg.__name__}.{m.name}')\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {QT!r}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
