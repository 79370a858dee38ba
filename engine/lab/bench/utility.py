"""``dptop bench --anchors DIR``: utility beside speed — F1 and MRE of dptop and the authors' C++ on
the same Zipf streams (docs/dpss-eehh.md §8.1 setup; the C++ through ``DIR/dphh-driver``, whose JSON
line also carries ``released``: the ``[item, estimate]`` pairs its ``query()`` returned).

Streams: 2^21 items over a domain of 2^20 (Zipf 1.1 and 1.5; quick: 2^20 items), δ = 10^-6, one
stream per skew and ``RUNS`` runs per row on it, dptop and C++ alternating (fresh noise and hash
seeds each run). True heavy hitters: count >= n/k (as the C++ harness scores). F1 = 2PR/(P + R);
MRE = mean |estimate − f|/f over the released items. Both columns are means over the runs.
dptop runs get the replay's public packet count (``stream_length``), as ``dptop replay`` does;
the C++ gets the exact n and T = n (DPHH's main).

DPSW rows (paper 004): the window of the last w = 250,000 items at the stream's end, γ-heavy hitters
(window count >= γ·w) for γ = 0.005 and 0.01, ε = 1, δ = 3·10^-11, depth 5, width 4096, ten
substreams, α = 0.75; dptop's default query (the prefix hierarchy) against the C++ ``DPSW::Query``
over every distinct item of the window (``DIR/dpsw-driver ... QUERY_FILE HH_GAMMA`` prints those
with estimate >= γ·w as ``released``); ``DPSW_RUNS`` runs per row.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.lab.bench.load import load_average
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters
from dptop.engine.sliding_window.geometry import rho_from_epsilon_delta

DELTA = 1e-6
DOMAIN = 1 << 20
RUNS = 5
PAIRS = (("dpss", "ssso", 2), ("dpmg", "mgso", 2), ("eehh-cms", "cmssohh", 4))
"""(dptop algorithm, DPHH class, k~/k)."""
POINTS = ((128, 1.0), (512, 1.0), (128, 0.1), (512, 0.1))
"""(k, ε) rows."""
BATCH = 1 << 16
DPSW_WINDOW, DPSW_GAMMAS, DPSW_RUNS = 250_000, (0.005, 0.01), 3
DPSW_EPSILON, DPSW_DELTA, DPSW_DEPTH, DPSW_WIDTH, DPSW_BETA = 1.0, 3e-11, 5, 4096, 0.01
"""β = 0.01 gives the C++ depth ⌈ln(1/β)⌉ = 5."""


def score(released: dict[int, float], counts: dict[int, int], n: int, k: int) -> tuple[float, float, float, float]:
    """(F1, MRE, precision, recall) of ``released`` (item -> estimate) against exact ``counts``."""
    truth = {x for x, c in counts.items() if c >= n / k}
    hit = len(truth & released.keys())
    p = hit / len(released) if released else 1.0
    r = hit / len(truth) if truth else 1.0
    f1 = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    errors = [abs(v - counts.get(x, 0)) / counts[x] for x, v in released.items() if counts.get(x, 0) > 0]
    return f1, float(np.mean(errors)) if errors else 0.0, p, r


def _row(name: str, cpp: str, skew: float, k, eps: float, ours: list, theirs: list) -> dict:
    """One table row: means over the runs of (F1, MRE, precision, recall) on both sides."""
    mean = lambda xs, i: round(statistics.fmean(x[i] for x in xs), 3)  # noqa: E731
    return {"dptop": name, "cpp": cpp, "skew": skew, "k": k, "epsilon": eps, "f1": mean(ours, 0),
            "cpp_f1": mean(theirs, 0), "mre": mean(ours, 1), "cpp_mre": mean(theirs, 1),
            "precision": mean(ours, 2), "recall": mean(ours, 3), "cpp_precision": mean(theirs, 2),
            "cpp_recall": mean(theirs, 3), "load": load_average()}


def _ours(name: str, k: int, k_tilde: int, eps: float, addresses: np.ndarray, keys: np.ndarray) -> dict[int, float]:
    alg = registry.make(name, Settings(k=k, k_tilde=k_tilde, epsilon=eps, delta=DELTA), PublicFacts.of(len(keys)))
    for s in range(0, len(keys), BATCH):
        alg.update(keys[s:s + BATCH])
    rel = alg.release()
    return {int(it.lo) & 0xFFFF_FFFF: float(it.estimate) for it in rel.items}


def _theirs(driver: Path, cpp: str, path: str, k: int, k_tilde: int, eps: float, n: int) -> dict[int, float]:
    cmd = [str(driver / "dphh-driver"), cpp, path, str(k), str(k_tilde), repr(eps), repr(DELTA), str(n), "32"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900).stdout
    r = json.loads(out.strip().splitlines()[-1])
    if "released" not in r:
        raise ValueError(f"{driver / 'dphh-driver'} prints no 'released' pairs (see dptop.engine.lab.bench.utility)")
    return {int(x): float(v) for x, v in r["released"]}


def run_utility(folder: str, quick: bool, runs: int = RUNS, only: tuple[str, ...] | None = None) -> dict:
    """The utility table (module docstring); ``only`` limits it to some dptop algorithms."""
    driver = Path(folder)
    length = 1 << (20 if quick else 21)
    runs = 2 if quick else runs
    rows = []
    with tempfile.TemporaryDirectory(prefix="dptop-utility-") as tmp:
        for skew in (1.1, 1.5):
            addresses = ipv4_of_rank(zipf_ranks(skew, DOMAIN, length, seed=21))
            keys = keys_of_ipv4(addresses)
            path = str(Path(tmp) / f"zipf{skew}.u32")
            addresses.astype("<u4").tofile(path)
            items, freq = np.unique(addresses, return_counts=True)
            counts = dict(zip(items.tolist(), freq.tolist()))
            for name, cpp, ratio in PAIRS:
                if only is not None and name not in only:
                    continue
                for k, eps in POINTS:
                    ours, theirs = [], []
                    for _ in range(runs):
                        ours.append(score(_ours(name, k, ratio * k, eps, addresses, keys), counts, length, k))
                        theirs.append(score(_theirs(driver, cpp, path, k, ratio * k, eps, length), counts, length, k))
                    rows.append(_row(name, cpp, skew, k, eps, ours, theirs))
            if only is None or "dpsw" in only:
                rows += _dpsw_rows(driver, tmp, skew, addresses, keys, 1 if quick else DPSW_RUNS)
    note = (f"F1 and MRE, means of {runs} runs per row (dptop and C++ alternating) on one Zipf stream per skew "
            f"of {length} items over {DOMAIN}, δ = {DELTA:g}; heavy hitters: count >= n/k; k~ = 2k "
            "(dpss, dpmg) and 4k (eehh-cms; C++ CMSSOHH width 2·4k, depth 32); dpsw: the last "
            f"{DPSW_WINDOW} items, γ-heavy (count >= γ·w), ε = {DPSW_EPSILON:g}, δ = {DPSW_DELTA:g}, "
            f"{1 if quick else DPSW_RUNS} runs per row")
    return {"name": "utility vs the authors' C++", "rows": rows, "notes": note}


def _dpsw_ours(gamma: float, keys: np.ndarray) -> dict[int, float]:
    alg = DPSWHeavyHitters(Settings(window=DPSW_WINDOW, gamma=gamma, epsilon=DPSW_EPSILON, delta=DPSW_DELTA,
                                    extra={"depth": DPSW_DEPTH, "width": DPSW_WIDTH}))
    for s in range(0, len(keys), BATCH):
        alg.update(keys[s:s + BATCH])
    return {int(it.lo) & 0xFFFF_FFFF: float(it.estimate) for it in alg.release().items}


def _dpsw_rows(driver: Path, tmp: str, skew: float, addresses: np.ndarray, keys: np.ndarray, runs: int) -> list[dict]:
    """DPSW rows (module docstring) on the stream's last window."""
    items, freq = np.unique(addresses[-DPSW_WINDOW:], return_counts=True)
    counts = dict(zip(items.tolist(), freq.tolist()))
    stream, query = str(Path(tmp) / f"zipf{skew}.u32"), str(Path(tmp) / f"window{skew}.u32")
    items.astype("<u4").tofile(query)
    rho = rho_from_epsilon_delta(DPSW_EPSILON, DPSW_DELTA)
    rows = []
    for gamma in DPSW_GAMMAS:
        cmd = [str(driver / "dpsw-driver"), stream, str(DPSW_WINDOW), "10", repr(1 / DPSW_WIDTH), str(DPSW_BETA),
               repr(rho), "0.75", query, repr(gamma)]
        ours, theirs = [], []
        for _ in range(runs):
            ours.append(score(_dpsw_ours(gamma, keys), counts, DPSW_WINDOW, 1 / gamma))
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if "released" not in r:
                raise ValueError(f"{driver / 'dpsw-driver'} prints no 'released' pairs (see dptop.engine.lab.bench.utility)")
            theirs.append(score({int(x): float(v) for x, v in r["released"]}, counts, DPSW_WINDOW, 1 / gamma))
        rows.append(_row("dpsw hierarchy", "DPSW scan", skew, f"γ {gamma:g}", DPSW_EPSILON, ours, theirs))
    return rows
