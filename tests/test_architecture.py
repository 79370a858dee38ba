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
    assert "dptop.monitor.publish" in imports(ROOT / "app" / "gui" / "export.py")  # one private view
    assert "dptop.monitor.publish" in imports(ROOT / "app" / "headless.py")


def _package_tree(target: Path) -> Path:
    """The source folders laid out as the installed package (``dptop`` = app/, ``dptop.engine`` = engine/, ...)."""
    import shutil

    for package, folder in _setuptools_config()["package-dir"].items():
        shutil.copytree(ROOT / folder, target / Path(*package.split(".")), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _lint(tree: Path) -> subprocess.CompletedProcess:
    import os
    import shutil

    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        import pytest

        pytest.skip("import-linter not installed (pip install '.[test]')")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], capture_output=True,
                          text=True, env=env, cwd=tree, timeout=300)


def test_the_import_contracts_catch_a_view_building_algorithms_and_an_engine_layer_upside_down(tmp_path):
    """The broken variants of two contracts ``make lint`` keeps: the window importing the registry
    and the engine core importing a mechanism package are each reported broken by name."""
    tree = _package_tree(tmp_path / "tree")
    with open(tree / "dptop" / "gui" / "plots.py", "a") as f:
        f.write("\nfrom dptop.engine.core import registry  # noqa: E402,F401\n")
    with open(tree / "dptop" / "engine" / "core" / "topk.py", "a") as f:
        f.write("\nimport dptop.engine.continual.lazyhh  # noqa: E402,F401\n")
    run = _lint(tree)
    assert run.returncode == 1, run.stdout
    assert "dptop.gui.plots -> dptop.engine.core.registry" in run.stdout
    assert "dptop.engine.core.topk -> dptop.engine.continual.lazyhh" in run.stdout


def test_the_import_contracts_are_kept_by_the_tree(tmp_path):
    run = _lint(_package_tree(tmp_path / "tree"))
    assert run.returncode == 0 and "0 broken" in run.stdout, run.stdout


def test_the_lab_contract_catches_the_product_importing_the_lab(tmp_path):
    """The product never imports the lab: a mechanism reaching for the audit, the monitor for a benchmark
    and the capture for a paced sender are each reported by name, while the CLI may load the lab."""
    tree = _package_tree(tmp_path / "tree")
    injected = {tree / "dptop" / "engine" / "single_release" / "dpss.py": "from dptop.engine.lab.audit import cases",
                tree / "dptop" / "monitor" / "session.py": "from dptop.lab import replaybench",
                tree / "dptop" / "capture" / "live.py": "from dptop.capture.lab import paced"}
    for path, line in injected.items():
        with open(path, "a") as f:
            f.write(f"\n{line}  # noqa: E402,F401\n")
    run = _lint(tree)
    assert run.returncode == 1, run.stdout
    broken = run.stdout[run.stdout.index("Broken contracts"):]
    assert "the product never imports the lab" in broken
    for chain in ("dptop.engine.single_release.dpss -> dptop.engine.lab.audit.cases",
                  "dptop.monitor.session -> dptop.lab.replaybench", "dptop.capture.live -> dptop.capture.lab.paced"):
        assert chain in broken, broken


def test_the_algorithm_list_is_in_the_registry_order_whatever_was_imported_first():
    """The window's parameter and tuning lists, ``dptop list`` and the matrix read ``registry.names()``;
    a module imported early (a test, a view) used to put its algorithms first (lazy-cms before dpss)."""
    def names(first: str) -> str:
        code = f"import {first}\nfrom dptop.engine.core import registry\nprint(registry.names())"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    plain = names("dptop.engine.core.registry")
    assert plain.startswith("['exact', 'spacesaving'")
    assert names("dptop.engine.continual.lazysketch") == names("dptop.engine.local_dp.domain_schemes") == plain
