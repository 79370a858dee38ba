"""window-exact (engine/baselines/window.py) against a plain deque + Counter reference."""
from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pytest

from dptop.engine.core.workload import zipf_keys
from dptop.engine.core.settings import Settings
from dptop.engine.baselines.window import ExactWindow, WindowExact


def reference(stream: list[tuple[int, int]], w: int) -> Counter:
    window: deque = deque(maxlen=w)
    window.extend(stream)
    return Counter(window)


@pytest.mark.parametrize("w,seed", [(1, 0), (7, 1), (100, 2), (1000, 3)])
def test_matches_deque_counter_reference(w, seed):
    rng = np.random.default_rng(seed)
    keys = zipf_keys(1.1, 300, 5000, seed)
    keys[::17, 0] = rng.integers(1, 5, len(keys[::17]), dtype=np.uint64)  # some IPv6 keys too
    ex = ExactWindow(w)
    done = 0
    while done < len(keys):
        n = int(rng.integers(0, 3 * w + 2))
        ex.add(keys[done:done + n])
        done = min(done + n, len(keys))
        want = reference([tuple(k) for k in keys[max(0, done - w):done].tolist()], w)  # a deque of w keeps these
        got_keys, got_counts = ex.items()
        got = {tuple(k): int(c) for k, c in zip(got_keys.tolist(), got_counts)}
        assert got == dict(want), f"window {w}, after {done} keys (seed {seed})"
        k0 = tuple(keys[max(0, done - 1)].tolist())
        assert ex.count_of(*k0) == want.get(k0, 0)


def test_release_threshold_and_top():
    keys = zipf_keys(1.2, 50, 4000, 9)
    alg = WindowExact(Settings(window=1000, gamma=0.05))
    alg.update(keys)
    alg.packets = len(keys)
    rel = alg.release()
    want = reference([tuple(k) for k in keys.tolist()], 1000)
    assert {(i.hi, i.lo) for i in rel.items} == {k for k, c in want.items() if c >= 50}
    assert rel.threshold == 50 and rel.span.start == 3000 and rel.span.end == 4000
    top = WindowExact(Settings(window=1000, k=3))
    top.update(keys)
    assert [i.estimate for i in top.release().items] == sorted(want.values(), reverse=True)[:3]


def test_validation():
    with pytest.raises(ValueError, match=r"window \(0\) must be >= 1"):
        WindowExact(Settings(window=0))
    with pytest.raises(ValueError, match=r"gamma \(1.5\) must be in \(0, 1\)"):
        WindowExact(Settings(window=10, gamma=1.5))
