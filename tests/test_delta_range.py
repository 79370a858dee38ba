"""One range of δ for the command line, the window's fields and every algorithm (engine/core/settings.py
``RANGES["delta"]``): the same values accepted and refused everywhere; a mechanism's own check
(``check_delta``, which also sees shares of δ) takes every δ of that range, and shares below it."""
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.cli import build_parser
from dptop.engine.core.settings import RANGES, Settings, check_delta
from dptop.monitor.config import RunConfig, config_errors

INSIDE = (1e-100, 1e-6, 0.1, 0.4999)
OUTSIDE = (0.0, 1e-101, 0.5, 0.9, 1.0, float("nan"), -1e-6)


def cli_accepts(delta: float) -> bool:
    try:
        build_parser().parse_args(["replay", "x.pcap", "--delta", repr(delta)])
    except SystemExit:
        return False
    return True


def engine_accepts(delta: float) -> bool:
    try:
        check_delta(delta)
    except ValueError:
        return False
    return True


def config_accepts(delta: float, name: str) -> bool:
    """What the window's Apply and every view's check ask (``config_errors``)."""
    return not config_errors(RunConfig((name,), Settings(delta=delta)), PublicFacts.of(10_000))


@pytest.mark.parametrize("delta", INSIDE + OUTSIDE)
def test_every_layer_takes_the_same_deltas(delta):
    inside = delta in INSIDE
    assert (delta in RANGES["delta"]) is inside
    assert cli_accepts(delta) is inside
    assert engine_accepts(delta) is (inside or 0 < delta < RANGES["delta"].low or RANGES["delta"].high <= delta < 1)
    for name in ("dpss", "lazyhh", "dpsw"):
        assert config_accepts(delta, name) is inside, name
