"""Empty epochs in bulk: one stamp days ahead on a 1 s grid costs microseconds per empty epoch,
not a release object each, and what a view reads keeps its law (every epoch is still released,
with its noise; the count and the span positions include the bulk)."""
import json
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.facts import Provenance, PublicFacts
from dptop.engine.core.keys import KEY_DTYPE, KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.single_release import epochs
from tests.capture_files import ether, ipv4, pcap

DAY = 86_400 * 10**9
START = 1_700_000_000 * 10**9


def stamped_capture(path, ahead_ns: int, packets: int = 2000):
    """``packets`` packets over about 20 s from 30 sources, then one stamped ``ahead_ns`` later."""
    frames = [ether(0x0800, ipv4(f"10.0.0.{i % 30 + 1}")) for i in range(packets)] + [ether(0x0800, ipv4("10.9.9.9"))]
    times = [START + i * 10**7 for i in range(packets)] + [START + packets * 10**7 + ahead_ns]
    path.write_bytes(pcap(frames, times=times))
    return path


def algorithm(name: str, cells: int, seed: int = 7):
    facts = PublicFacts.of(stream_length=100, time_range=(0, cells * 10**9), length_provenance=Provenance.DECLARED)
    return registry.make(name, Settings(k=8, epoch_seconds=1.0, seed=seed), facts)


def keys(n: int) -> np.ndarray:
    out = np.zeros((n, 2), KEY_DTYPE)
    out[:, 1] = 0xFFFF0A000001
    return out


@pytest.mark.parametrize("name", ["dpss", "dpmg", "eehh-cms"])
def test_a_long_run_of_empty_epochs_is_counted_whole_and_builds_few_objects(name):
    """A jump of 50,000 cells: the releases returned are the last SHOWN ones, the runner's count
    includes the bulk, every epoch index is consumed once and the spans stay contiguous."""
    cells = 50_002
    alg = algorithm(name, cells)
    out = alg.consume(KeyBatch(keys(50), np.zeros(50, np.int64), epoch=0))
    out += alg.consume(KeyBatch(keys(5), np.full(5, (cells - 1) * 10**9, np.int64), epoch=cells - 1))
    out += alg.finish()
    assert len(out) == 1 + epochs.SHOWN + 1
    assert sum(1 + r.released_before for r in out) == cells
    assert [r.span.index for r in out[1:]] == list(range(cells - epochs.SHOWN - 1, cells))
    assert out[1].released_before == cells - epochs.SHOWN - 2
    for a, b in zip(out[1:], out[2:]):
        assert b.span.start == a.span.end  # positions from noisy lengths
    bulk = out[1].span.start - out[0].span.end  # the bulk's clipped noisy lengths, summed
    assert bulk > 0 if getattr(alg, "eps_n", None) is not None else bulk == 0


def test_the_bulk_positions_have_the_one_by_one_law():
    """The sum of the clipped noisy lengths of 20,000 empty epochs released in bulk and one by
    one: the same mean within 5 standard errors (DPSS's ε_n)."""
    alg = algorithm("dpss", 10)
    bulk = alg.empty_lengths(20_000)
    single = sum(max(alg.length_noise(), 0) for _ in range(20_000))
    draws = np.maximum(alg.noise.dlap_array(alg.eps_n, 20_000), 0)
    se = draws.std() * np.sqrt(20_000)
    assert abs(bulk - single) < 5 * np.sqrt(2) * se, (bulk, single, se)
    assert bulk > 0


def test_bulk_cost_grows_far_slower_than_the_run():
    """A run 16 times longer costs far less than 16 times more (the objects are bounded)."""
    def seconds(cells):
        alg = algorithm("dpss", cells)
        alg.consume(KeyBatch(keys(5), np.zeros(5, np.int64), epoch=0))
        t = time.perf_counter()
        alg.consume(KeyBatch(keys(5), np.zeros(5, np.int64), epoch=cells - 1))
        return time.perf_counter() - t

    seconds(2 * epochs.SHOWN)  # kernels loaded
    rounds = [(seconds(2 * epochs.SHOWN), seconds(32 * epochs.SHOWN)) for _ in range(3)]  # in turn: both see the load
    short, long = min(r[0] for r in rounds), min(r[1] for r in rounds)
    assert long < 4 * short, rounds


def test_one_stamp_twelve_days_ahead_replays_at_once_within_the_memory_limit(tmp_path):
    """The capture of the fault: 1M cells of 1 s with dpss, dpmg, eehh-cms and --memory-limit 1G
    ends, writes every epoch's count, and its peak RSS stays under the limit."""
    path = stamped_capture(tmp_path / "ahead.pcap", 12 * DAY)
    out = tmp_path / "out.json"
    # the peak of this process's own memory (VmHWM): ru_maxrss would keep the forking pytest
    # worker's peak across exec, over 1 GiB after the GUI tests
    code = ("import sys\nfrom dptop.cli import main\nrc = main(sys.argv[1:])\n"
            "hwm = next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:'))\n"
            "print(int(hwm.split()[1]), file=sys.stderr)\nsys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code, "replay", str(path), "--epoch-seconds", "1",
                           "--algorithms", "dpss,dpmg,eehh-cms", "--memory-limit", "1G", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    assert peak_kib < 1 << 20, f"peak RSS {peak_kib} KiB over the 1G limit"
    result = json.loads(out.read_text())
    cells = 12 * 86_400 + 21
    for name in ("dpss", "dpmg", "eehh-cms"):
        assert cells - 2 <= result["budget"]["algorithms"][name]["releases"] <= cells + 2
        assert len(result["algorithms"][name]["releases"]) <= epochs.SHOWN


def test_a_sampler_asked_for_no_draws_reads_no_randomness():
    """An empty epoch's k~ counters are zero draws: the generator is left as it was."""
    from dptop.engine.privacy.noise import NoiseSource
    noise = NoiseSource(seed=3)
    state = noise._rng.getstate()
    assert len(noise.dlap_array(0.5, 0)) == 0 and len(noise.discrete_laplace_batch(Fraction(2), 0)) == 0
    assert noise._rng.getstate() == state
    assert len(noise.dlap_array(0.5, 1)) == 1 and noise._rng.getstate() != state  # one draw does read


@pytest.mark.parametrize("name", ["dpss", "dpmg"])
def test_the_built_empty_epochs_noisy_lengths_have_the_one_draw_law(name):
    """The SHOWN empty epochs built as releases take their noisy lengths from one bulk draw: each
    ñ = DLap(ε_n), mean 0 and variance 2α/(1 − α)² within 5 standard errors, one draw per epoch."""
    cells = epochs.SHOWN + 2
    alg = algorithm(name, cells)
    alg.consume(KeyBatch(keys(5), np.zeros(5, np.int64), epoch=0))
    out = alg.consume(KeyBatch(keys(5), np.full(5, (cells - 1) * 10**9, np.int64), epoch=cells - 1))
    lengths = np.array([r.status.noisy_length for r in out[1:]], dtype=float)  # out[0]: the epoch of packets
    assert len(lengths) == cells - 2 and alg._length_draws == []
    alpha = np.exp(-alg.eps_n)
    var = 2 * alpha / (1 - alpha) ** 2
    se_mean, se_var = np.sqrt(var / len(lengths)), var * np.sqrt(20 / len(lengths))  # kurtosis of DLap < 20 here
    assert abs(lengths.mean()) < 5 * se_mean, (lengths.mean(), se_mean)
    assert abs(lengths.var() - var) < 5 * se_var, (lengths.var(), var)
