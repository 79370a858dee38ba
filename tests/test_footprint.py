"""Memory before allocation: every registered algorithm states the bytes of its state from its
parameters alone (``Algorithm.footprint``), within a stated factor of the arrays it really
allocates; a run whose state would exceed the limit is refused in one line naming the parameter,
before any algorithm is built."""
from __future__ import annotations

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.cli import main
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.monitor import footprints
from dptop.monitor.config import RunConfig, config_errors
from dptop.monitor.footprints import MemoryLimit, memory_error, parse_size
from tests.conftest import DNS_CAPTURE

FACTOR = 1.25
"""The stated accuracy: estimate / allocated within [1/FACTOR, FACTOR]. The host-level mg-dup
variant (checked apart) states a second DP-MG summary its releases fill, so it is 2x above."""
POINTS = (
    dict(k=8, k_tilde=64, window=256, horizon=1 << 12, epoch_seconds=10.0),
    dict(k=16, k_tilde=2048, window=1 << 13, horizon=1 << 16, epoch_seconds=10.0),
)
PUBLIC = PublicFacts.of(1 << 16, (0, 10 ** 10))


def state_nbytes(obj) -> int:
    """The bytes of every distinct numpy buffer reachable from ``obj`` through dptop objects
    (attributes and slots), tuples, lists and dicts: what its construction really allocated."""
    seen, buffers = set(), {}

    def walk(o):
        if id(o) in seen:
            return
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            base = o
            while isinstance(base.base, np.ndarray):
                base = base.base
            buffers[id(base)] = base.nbytes
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)
        elif type(o).__module__.startswith("dptop"):
            for x in getattr(o, "__dict__", {}).values():
                walk(x)
            for slot in getattr(type(o), "__slots__", ()):
                walk(getattr(o, slot, None))

    walk(obj)
    return sum(buffers.values())


def settings_for(name: str, point: dict, extra: dict | None = None) -> Settings:
    return RunConfig((name,), Settings(**point, extra=extra or {})).settings_for(name, PUBLIC)


@pytest.mark.parametrize("name", registry.names())
def test_the_stated_memory_is_within_the_factor_of_the_allocated_state(name):
    for point in POINTS:
        settings = settings_for(name, point)
        stated = registry.get(name).footprint(settings, PUBLIC)
        real = state_nbytes(registry.make(name, settings, PUBLIC))
        assert real > 0 and 1 / FACTOR <= stated.nbytes / real <= FACTOR, (name, point, stated, real)
        assert stated.sized_by


def test_the_stated_memory_grows_with_k_tilde_as_the_state_does():
    """Not a constant: 32x the counters is about 32x the bytes for the k~-sized summaries."""
    for name in ("misragries", "spacesaving", "dpss", "dpmg"):
        small, large = (registry.get(name).footprint(settings_for(name, {**POINTS[0], "k_tilde": kt}), PUBLIC)
                        for kt in (1 << 10, 1 << 15))
        assert 24 <= large.nbytes / small.nbytes <= 40, name
        assert large.sized_by == "k~ = 32768"


def test_the_host_level_mg_dup_variant_states_its_release_summary_too():
    settings = settings_for("hostdp-dst", POINTS[1], {"variant": "mg-dup"})
    stated = registry.get("hostdp-dst").footprint(settings, PUBLIC).nbytes
    assert 1.0 <= stated / state_nbytes(registry.make("hostdp-dst", settings, PUBLIC)) <= 2 * FACTOR


def test_footprints_build_nothing(monkeypatch):
    """Stated from the parameters: no state constructor runs."""
    import dptop.engine.baselines.misragries as mg
    import dptop.engine.continual.gaussbm as gbm

    def refuse(*_):
        raise AssertionError("a state was built")

    monkeypatch.setattr(mg, "make_state", refuse)
    monkeypatch.setattr(gbm, "make_bm_state", refuse)
    for name in ("misragries", "dpmg", "lazyhh", "lazy-cms"):
        assert registry.get(name).footprint(settings_for(name, {**POINTS[0], "k_tilde": 1 << 24, "horizon": 1 << 25}),
                                           PUBLIC).nbytes > 1 << 30


def test_replay_with_k_tilde_at_the_top_is_refused_at_once_naming_it(monkeypatch, capsys):
    """The acceptance line: k~ = 2^24 for misragries (3.4 GB of state, twice while it starts) on a
    machine of 24 GB is refused, exit 2, one line naming k~ and the memory, nothing built."""
    import dptop.engine.baselines.misragries as mg

    monkeypatch.delenv(footprints.ENV, raising=False)
    monkeypatch.setattr(footprints, "machine_memory", lambda: 24 * 10 ** 9)
    monkeypatch.setattr(mg.MisraGries, "__init__", lambda *_: pytest.fail("misragries was built"))
    rc = main(["replay", str(DNS_CAPTURE), "--k-tilde", "16777216", "--algorithms", "misragries"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "misragries: k~ = 16777216 needs 6.3 GiB of memory" in err and "limit of 5.6 GiB" in err, err


def test_the_limit_is_overridable_by_option_and_environment(monkeypatch, capsys):
    config = RunConfig(("misragries",), Settings(k_tilde=1 << 20))  # 2 x 210 MB of state
    monkeypatch.setenv(footprints.ENV, "256M")
    assert "k~ = 1048576 needs 400.1 MiB" in config_errors(config)["settings"]
    assert config_errors(RunConfig(config.names, config.settings, memory_limit=MemoryLimit(1 << 30, "--memory-limit"))
                         ) == {}
    monkeypatch.setenv(footprints.ENV, "lots")
    assert "DPTOP_MEMORY_LIMIT ('lots') must be a positive size" in config_errors(config)["settings"]
    monkeypatch.setenv(footprints.ENV, "1G")
    rc = main(["replay", str(DNS_CAPTURE), "--k-tilde", "1048576", "--algorithms", "misragries",
               "--memory-limit", "300M"])
    assert rc == 2 and "more than the limit of 300.0 MiB (--memory-limit)" in capsys.readouterr().err


def test_the_run_total_names_the_largest_algorithm():
    line = memory_error({"countmin": footprints.Footprint(1 << 20, "k~ = 64"),
                         "lazyhh": footprints.Footprint(3 << 30, "k~ = 9")}, MemoryLimit(4 << 30, "test"))
    assert line.startswith("lazyhh: k~ = 9 needs 6.0 GiB of memory (6.0 GiB for the run)")
    assert memory_error({"exact": footprints.Footprint(1 << 20, "x")}, MemoryLimit(4 << 30, "test")) is None


@pytest.mark.parametrize("text, size", [("8G", 8 << 30), ("512MiB", 512 << 20), ("1.5g", 3 << 29), ("4096", 4096),
                                        ("2 KB", 2048)])
def test_sizes_parse_in_units_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "-1G", "nan", "inf", "", "8X", "1e9"])
def test_bad_sizes_are_refused_naming_the_option(text):
    with pytest.raises(ValueError, match="--memory-limit"):
        parse_size(text)
