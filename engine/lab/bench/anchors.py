"""``dptop bench --anchors DIR``: dptop against the authors' C++, side by side on the same streams.

No figure of the C++ is stored here: without ``DIR`` the table lists the pairs with "—". With
``DIR``, a folder holding two timing drivers that the user builds outside this repository from
the authors' sources (DPHH for papers 000/002, DP-Sliding-Window for paper 004), every pair is timed
alternately (ours, theirs, ours, ...) on one Zipf stream written to a temporary binary file, and
the ratios are per CPU-second and per wall second (> 1: dptop is faster).

Driver protocol (each prints one JSON object with ``updates``, ``cpu_s`` and ``wall_s`` of its
update loop only, plus ``depth`` for CountMin rows; ``dphh-driver`` also prints ``released``, the
``[item, estimate]`` pairs of the class's ``query()`` after the loop, which the utility table of
``dptop.engine.lab.bench.utility`` scores):

* ``DIR/dphh-driver ALGO STREAM K K_TILDE EPS DELTA T DEPTH`` with ALGO ``mg`` (MisraGries),
  ``mgso``, ``ssso``, ``cmssohh``;
* ``DIR/dpsw-driver STREAM W SUB_NUM GAMMA BETA RHO ALPHA``: ``DPSW::ProcessNew`` over the items
  after the first W (which build its initial window, untimed; ours ingests them untimed too).

STREAM holds little-endian uint32 items: the IPv4 addresses of our Zipf stream (dptop feeds the
same addresses as 128-bit keys). Both sides are timed on their update loop only, by process CPU
time, on the same stream with the same k and k~; every pair runs on Zipf 1.1 and 1.5.

EEHH against CMSSOHH, two rows per point. The two sketches size themselves differently: CMSSOHH
has width 2k~ and depth max(DEPTH, ln(4(T + k~)/δ) + 1); dptop's default is width 64k~ (a lower
threshold, ``eehh_envelope``) and the depth its envelope needs. The ``row-update`` row runs dptop
at CMSSOHH's width 2k~ (``--param width``), so a row costs the same memory traffic on both sides,
and divides each side's time by its depth. The ``update`` row runs dptop at its default geometry
and compares whole updates (what each needs for its guarantee at these parameters).

Every row carries ``load``, the 1-minute load average when its runs ended: the machine may be
shared, and CPU time only partly shields a figure from that.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.lab.bench.load import load_average
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters
from dptop.engine.sliding_window.geometry import rho_from_epsilon_delta

BATCH = 1 << 16
EPSILON, DELTA = 0.1, 1e-3
PAIRS = (("spacesaving", "ssso", 2), ("dpss", "ssso", 2), ("misragries", "mg", 2), ("dpmg", "mgso", 2),
         ("eehh-cms", "cmssohh", 4))
"""(dptop algorithm, DPHH class, k~/k)."""
DPSW_POINTS = ((250_000, 5), (250_000, 2), (1_000_000, 5), (1_000_000, 2))
DPSW_WIDTH, DPSW_ALPHA, DPSW_EPSILON, DPSW_DELTA = 4096, 0.75, 1.0, 3e-11
DPSW_BETA = {5: 0.01, 2: 0.2}
"""β giving the C++ depth ⌈ln(1/β)⌉ = the row's depth."""


def _ours_dphh(name: str, k: int, k_tilde: int, t_max: int, keys: np.ndarray,
               width: int | None = None) -> tuple[float, float, int]:
    """CPU and wall seconds of our update loop (batches of 2^16, state and sketch noise built first)."""
    extra = {"t_max": t_max} if width is None else {"t_max": t_max, "width": width}
    settings = Settings(k=k, k_tilde=k_tilde, epsilon=EPSILON, delta=DELTA, extra=extra)
    alg = registry.make(name, settings)
    if hasattr(alg, "_new_state"):
        state = alg._new_state()
        feed = lambda b: alg._feed(state, b)  # noqa: E731
    else:
        feed = alg.update
    c0, w0 = time.process_time(), time.perf_counter()
    for s in range(0, len(keys), BATCH):
        feed(keys[s:s + BATCH])
    depth = getattr(alg, "depth", 1) if name.startswith("eehh") else 1
    return time.process_time() - c0, time.perf_counter() - w0, depth


def _ours_dpsw(window: int, depth: int, keys: np.ndarray) -> tuple[float, float, int]:
    alg = DPSWHeavyHitters(Settings(window=window, gamma=0.005, epsilon=DPSW_EPSILON, delta=DPSW_DELTA,
                                    extra={"depth": depth, "width": DPSW_WIDTH}))
    for s in range(0, window, BATCH):
        alg.update(keys[s:min(s + BATCH, window)])
    c0, w0 = time.process_time(), time.perf_counter()
    for s in range(window, len(keys), BATCH):
        alg.update(keys[s:s + BATCH])
    return time.process_time() - c0, time.perf_counter() - w0, depth


def _measure_dphh(driver: Path, name: str, cpp: str, k: int, k_tilde: int, keys: np.ndarray, path: str,
                  width: int | None, repeats: int) -> dict:
    """Alternate runs of our ``name`` and the C++ ``cpp`` on the same stream (T = 2^25, DEPTH 32)."""
    t_max = 1 << 25
    _ours_dphh(name, k, k_tilde, t_max, keys[:BATCH], width)  # compile or load the kernels
    cmd = [str(driver / "dphh-driver"), cpp, path, str(k), str(k_tilde), str(EPSILON), str(DELTA), str(t_max), "32"]
    return _alternate(lambda: _ours_dphh(name, k, k_tilde, t_max, keys, width), lambda: _theirs(cmd), repeats)


def _theirs(cmd: list[str]) -> tuple[float, float, int]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["cpu_s"], r["wall_s"], int(r.get("depth", 1))


def _alternate(ours, theirs, repeats: int) -> dict:
    """Run ours and theirs alternately ``repeats`` times; medians of CPU and wall seconds."""
    o, t = [], []
    for _ in range(repeats):
        o.append(ours())
        t.append(theirs())
    med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
    return {"ours_cpu_s": med(o, 0), "ours_wall_s": med(o, 1), "ours_depth": o[0][2],
            "cpp_cpu_s": med(t, 0), "cpp_wall_s": med(t, 1), "cpp_depth": t[0][2]}


def _row(label: str, cpp: str, params: dict, m: dict | None, per_row: bool = False) -> dict:
    """A table row; ``per_row``: the ratio of row-updates (time / depth on each side)."""
    row = {"dptop": label, "cpp": cpp, **params}
    if m is None:
        row.update(ratio_cpu=None, ratio_wall=None)
        return row
    work_o, work_t = (m["ours_depth"], m["cpp_depth"]) if per_row else (1, 1)
    row.setdefault("depth", m["ours_depth"] if per_row else None)
    row.setdefault("cpp_depth", m["cpp_depth"] if per_row else None)
    row.update(ours_cpu_s=round(m["ours_cpu_s"], 3), cpp_cpu_s=round(m["cpp_cpu_s"], 3),
               ratio_cpu=round(work_o * m["cpp_cpu_s"] / (work_t * m["ours_cpu_s"]), 2),
               ratio_wall=round(work_o * m["cpp_wall_s"] / (work_t * m["ours_wall_s"]), 2), load=load_average())
    return row


def _stream_file(folder: str, addresses: np.ndarray, tag: str) -> str:
    path = os.path.join(folder, f"{tag}.u32")
    addresses.astype("<u4").tofile(path)
    return path


def run_anchors(folder: str | None, quick: bool) -> dict:
    """The side-by-side table (see the module docstring); "—" ratios when ``folder`` is None."""
    length = 1 << (21 if quick else 23)
    repeats = 3 if quick else 5
    rows = []
    driver = None if folder is None else Path(folder)
    if driver is not None:
        for exe in ("dphh-driver", "dpsw-driver"):
            if not os.access(driver / exe, os.X_OK):
                raise ValueError(f"--anchors ({folder}) must hold an executable {exe} (see dptop.engine.lab.bench.anchors)")
    with tempfile.TemporaryDirectory(prefix="dptop-anchors-") as tmp:
        for skew in (1.1, 1.5):
            addresses = ipv4_of_rank(zipf_ranks(skew, 100_000, length, seed=11))
            keys = keys_of_ipv4(addresses)
            path = None if driver is None else _stream_file(tmp, addresses, f"zipf{skew}")
            for name, cpp, ratio in PAIRS:
                for k in (128, 512):
                    k_tilde = ratio * k
                    # (work compared, dptop's width): CountMin rows twice, at CMSSOHH's width and at ours
                    plans = ((("row-update", 2 * k_tilde), ("update", None)) if name.startswith("eehh")
                             else (("update", None),))
                    for work, width in plans:
                        params = {"skew": skew, "k": k, "k_tilde": k_tilde, "updates": length, "work": work,
                                  "width": (width or "default") if name.startswith("eehh") else None}
                        m = None
                        if driver is not None:
                            m = _measure_dphh(driver, name, cpp, k, k_tilde, keys, path, width, repeats)
                        rows.append(_row(name, cpp, params, m, per_row=work == "row-update"))
        n = (1 << 21) if quick else (1 << 22)
        rho = rho_from_epsilon_delta(DPSW_EPSILON, DPSW_DELTA)
        for skew in (1.1, 1.5):
            addresses = ipv4_of_rank(zipf_ranks(skew, 1 << 20, n, 1))
            keys = keys_of_ipv4(addresses)
            path = None if driver is None else _stream_file(tmp, addresses, f"dpsw{skew}")
            for window, depth in DPSW_POINTS:
                params = {"skew": skew, "window": window, "depth": depth, "cpp_depth": depth, "updates": n - window}
                m = None
                if driver is not None:
                    cmd = [str(driver / "dpsw-driver"), path, str(window), "10", repr(1 / DPSW_WIDTH),
                           str(DPSW_BETA[depth]), repr(rho), str(DPSW_ALPHA)]
                    m = _alternate(lambda: _ours_dpsw(window, depth, keys), lambda: _theirs(cmd), min(repeats, 3))
                rows.append(_row("dpsw hierarchy", "DPSW", params, m))
    note = ("ratio = C++ seconds / dptop seconds for the same updates (work row-update: each side's time per "
            "sketch row), by process CPU time and by wall clock; medians of alternate runs (ours, C++, ours, "
            f"...: {repeats} each, DPSW {min(repeats, 3)}); load: 1-minute load average when the row's runs ended")
    if driver is None:
        note += "; no measurement without --anchors DIR (see dptop.engine.lab.bench.anchors for the drivers)"
    return {"name": "anchors (authors' C++ side by side)", "rows": rows, "notes": note}
