"""One set of defaults (dptop.monitor.defaults) for the window, the command line, ``top`` and the
demo, windowed or headless; under them a 2,000 packets/s link with a 30 % and a 10 % source is
released within the stated times (measured on the public clock, not waited for), and the window
releases what the command line releases on the same capture with the same seed."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import ipaddress
import json

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from dptop.capture.pcap import read_keys
from dptop.capture.synth import write_pcap
from dptop.cli import build_parser, main
from dptop.engine.core import registry
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.keys import KeyBatch, tick
from dptop.engine.core.workload import ipv4_of_rank
from dptop.gui.configs import default_config, demo_config
from dptop.gui.main import MainWindow
from dptop.monitor.config import LIVE_EPOCH_SECONDS
from dptop.runargs import config_from_args
from tests.conftest import DNS_CAPTURE

RATE = 2000  # packets per second of the link
SECONDS = 200
SHARES = {0.3: 1, 0.1: 2}  # share -> Zipf rank of the host that sends it
DEADLINES = {"dpss": {0.3: 60, 0.1: 60}, "dpsw": {0.3: 60, 0.1: 60}, "lazyhh": {0.3: 60, 0.1: 180}}
T0 = 1_700_000_000 * 10**9
WARM = 180_000


def cli_config(*argv):
    return config_from_args(build_parser().parse_args(["replay", "x.pcap", *argv]))


def test_the_window_the_command_line_top_and_the_demo_share_their_defaults():
    """Finding 7: the window started with k = 8 and 5 s epochs, the command line with k = 16 and one
    release per file."""
    from dptop.monitor import defaults

    cli, window = cli_config(), default_config()
    assert window.names == cli.names == defaults.algorithms()
    assert window.settings == cli.settings and window.counting == cli.counting
    top = config_from_args(build_parser().parse_args(["top", "x.pcap"]))
    assert top.settings == cli.settings and top.names == cli.names
    headless = cli_config(*defaults.demo_args())  # `dptop demo` without a display
    assert demo_config().names == headless.names and demo_config().settings == headless.settings


@pytest.fixture(scope="module")
def link(tmp_path_factory):
    """A synthetic pcap (capture/synth.py) of a 2,000 packets/s link: one host sends 30 %, one 10 %,
    the rest spread over 5,000 hosts; read back by the capture's own parser."""
    rng = np.random.default_rng(7)
    n = RATE * SECONDS
    u = rng.random(n)
    ranks = np.where(u < 0.3, 1, np.where(u < 0.4, 2, rng.integers(3, 5000, n)))
    path = tmp_path_factory.mktemp("link") / "link.pcap"
    write_pcap(path, ipv4_of_rank(ranks), np.arange(n, dtype=np.int64) * (10**9 // RATE) + T0)
    keys, ts, _ = read_keys(path)
    hosts = {share: str(ipaddress.IPv4Address(int(ipv4_of_rank(np.array([rank]))[0])))
             for share, rank in SHARES.items()}
    return keys, ts, hosts


def seconds_to_release(name: str, keys, ts, hosts) -> dict[float, int | None]:
    """Feed ``name``, built as a live session's lane under the defaults (live public facts: a clock
    that started with the capture, no length), one second of packets at a time, each followed by
    the public clock's tick; after each second read what its panel would show (``live()``), and
    return the first second each host is in it (None: never within ``SECONDS``)."""
    config = default_config()
    facts = PublicFacts.of(time_range=(T0, None))
    settings = config.settings_for(name, facts)
    if registry.get(name).family == "single-release":
        settings = settings.with_(epoch_seconds=LIVE_EPOCH_SECONDS)  # what a live session sets (session.py)
    algorithm = registry.make(name, settings, facts, config.counting.counted())
    grid = None if settings.epoch_seconds is None else TimeGrid(T0, round(settings.epoch_seconds * 1e9), MAX_CELLS)
    first: dict[float, int | None] = {share: None for share in hosts}
    for second in range(SECONDS):
        a, b = second * RATE, (second + 1) * RATE
        if grid is None:
            algorithm.consume(KeyBatch(keys[a:b], ts[a:b]))
        else:
            algorithm.consume(KeyBatch(keys[a:b], ts[a:b], epoch=int(grid.cell_of(ts[a:a + 1])[0])))
            algorithm.consume(tick(int(grid.cell_of(np.array([T0 + (second + 1) * 10**9]))[0])))
        release = algorithm.live()
        shown = set() if release is None else {it.address for it in release.items}
        for share, host in hosts.items():
            if first[share] is None and host in shown:
                first[share] = second + 1
    return first


@pytest.mark.parametrize("name", sorted(DEADLINES))
def test_a_10_percent_source_of_a_2000_pps_link_is_released_in_time(name, link, record_property):
    keys, ts, hosts = link
    first = seconds_to_release(name, keys, ts, hosts)
    record_property(f"{name}_seconds", first)
    print(f"\n{name}: " + ", ".join(f"{share:.0%} source after {s} s" for share, s in first.items()))
    for share, deadline in DEADLINES[name].items():
        assert first[share] is not None and first[share] <= deadline, (name, share, first)


def private_view(path) -> dict:
    view = json.loads(path.read_text())
    return {name: [(r["span"], [(i["address"], i["estimate"]) for i in r["items"]]) for r in alg["releases"]]
            for name, alg in view["algorithms"].items()}


def test_the_window_releases_what_the_command_line_releases(qtbot, tmp_path):
    """The same capture, the same seed, the defaults: the window's export equals ``--publish``."""
    assert main(["replay", str(DNS_CAPTURE), "--seed", "11", "--publish", str(tmp_path / "cli.json")]) == 0
    config = default_config()
    seeded = type(config)(config.names, config.settings.with_(seed=11), config.extras, config.counting)
    window = MainWindow(seeded, settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.open_file(str(DNS_CAPTURE), speed=None)
    qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)
    _, json_path = window.export_to(tmp_path / "window")
    cli, gui = private_view(tmp_path / "cli.json"), private_view(json_path)
    assert set(gui) == {"dpss", "lazyhh", "dpsw"} and gui == cli
    window.close()
