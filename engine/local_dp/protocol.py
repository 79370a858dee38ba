"""What agents and the collector exchange (docs/local-dp.md §10.1), and nothing else.

* Collector -> agents: a ``Snapshot`` (version, phase, hot item IDs, and in prefix mode the
  parent prefixes that define the level's domain). It is a function of the collector's sketch,
  itself post-processing of randomized reports, so publishing it costs no privacy.
* Agent -> collector: ``Reports``, three arrays per report: (version, tag, symbol). The version
  and tag depend only on the public snapshot the agent used; the symbol is the randomized output.

Tags name the mechanism that produced the symbol, so the collector debiases with the mechanism the
agent actually used, never with its own current phase (§5 [D] rule, §10.3 item 3):

=============  ==========================================  ==================================
tag            mechanism                                   symbol
=============  ==========================================  ==================================
``TAG_GRR``    GRR over the version's domain (BGR; DSR     an index of the domain
               entire phase; BDR/CNR before any hot set)
``TAG_SHRUNK`` DSR shrunk phase: GRR over H ∪ {⊥}          a hot cell index, or λ_h for ⊥
``TAG_HOT``    BDR/CNR, judged hot: M_hot over H           an index into the snapshot's H
``TAG_COLD``   BDR/CNR, judged cold: M_cold over Ω \\ H     an index of the domain, not in H
=============  ==========================================  ==================================

Both types are NamedTuples of plain numpy arrays and ints, so they pickle for a transport (Dask,
sockets) between machines; the in-process wiring hands them over directly. Wire sizes follow
003 A.7.1 (§1.5): integers in the fewest of 1–8 bytes for their range.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

TAG_GRR, TAG_SHRUNK, TAG_HOT, TAG_COLD = 0, 1, 2, 3
TAG_NAMES = {TAG_GRR: "grr", TAG_SHRUNK: "shrunk", TAG_HOT: "hot", TAG_COLD: "cold"}
VERSION_BYTES, TAG_BYTES = 4, 1


class Snapshot(NamedTuple):
    """The public state an agent randomizes against."""

    version: int
    phase: int  # TAG_GRR or TAG_SHRUNK (DSR), TAG_GRR or TAG_HOT (BDR/CNR: judge, then hot/cold)
    hot: np.ndarray  # int64 hot item IDs (DSR: one per heavy cell, in cell order)
    parents: np.ndarray  # int64, sorted: prefix mode's parent prefixes (empty otherwise)


class Reports(NamedTuple):
    """Randomized reports: one (version, tag, symbol) per selected packet."""

    version: np.ndarray  # int64
    tag: np.ndarray  # uint8
    symbol: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.symbol)


def make_reports(n: int) -> Reports:
    return Reports(np.zeros(n, np.int64), np.zeros(n, np.uint8), np.zeros(n, np.int64))


def int_bytes(values: int) -> int:
    """Bytes of an integer in [0, values) in the minimal width (§1.5)."""
    return max(1, (max(int(values) - 1, 1).bit_length() + 7) // 8)


def report_bytes(symbols: int) -> int:
    """One report on the wire: version, tag and a symbol in [0, ``symbols``)."""
    return VERSION_BYTES + TAG_BYTES + int_bytes(symbols)


def snapshot_bytes(snapshot: Snapshot, item_values: int) -> int:
    """One snapshot download: version, phase, the hot IDs and parent prefixes."""
    ids = len(snapshot.hot) + len(snapshot.parents)
    return VERSION_BYTES + TAG_BYTES + ids * int_bytes(item_values)


def version_runs(version: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) runs of equal version, in arrival order."""
    if len(version) == 0:
        return []
    cuts = np.flatnonzero(np.diff(version)) + 1
    edges = [0, *cuts.tolist(), len(version)]
    return list(zip(edges[:-1], edges[1:]))


class VersionBook:
    """The collector's record of the snapshots it published: the last ``keep`` versions. A report
    naming an older (expired) or never published version is rejected and counted (§10.3 item 3,
    test L9)."""

    def __init__(self, keep: int = 16):
        self.keep = keep
        self.latest = -1
        self._info: dict[int, object] = {}

    def publish(self, info) -> int:
        self.latest += 1
        self._info[self.latest] = info
        self._info.pop(self.latest - self.keep, None)
        return self.latest

    def get(self, version: int):
        return self._info.get(int(version))


class CollectorBase:
    """The collector's side of the exchange: the version book, validation of each report's
    (version, tag, symbol) against the snapshot it names, and counts of what was accepted and
    rejected. Subclasses say which tags a version allows (``allowed``), which symbols are valid
    (``valid``), insert a validated run of one version (``_insert_run``) and publish estimates."""

    def __init__(self, keep: int = 16):
        self.book = VersionBook(keep)
        self.accepted = dict.fromkeys(TAG_NAMES, 0)
        self.rejected = {"version": 0, "tag": 0, "symbol": 0}
        self.null_var = 0.0  # variance of a zero-count item's estimate over every report so far
        self.null_step = 0.0  # the largest change one report makes to an estimate

    def allowed(self, info, tags: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def valid(self, info, tags: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _insert_run(self, info, tags: np.ndarray, symbols: np.ndarray) -> None:
        raise NotImplementedError

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        """(items, estimated counts) of the heavy part."""
        raise NotImplementedError

    def unit(self) -> float:
        """Estimated reports per count unit: a new cell's count of 1 is worth this many."""
        raise NotImplementedError

    def threshold(self, log_term: float) -> float:
        """The estimate an item must exceed to be published [D]: Bernstein's bound for a zero-count
        item, t = b·L/3 + sqrt((b·L/3)² + 2σ²L) with L = ``log_term`` = ln(d/α), σ² the variance
        its estimate gathers over all reports so far (an upper bound on any cell's, which covers
        only the reports since it entered) and b the largest step one report can add; so
        P(estimate > t) <= α/d per item, also where the counts are Poisson-small. At least one
        count unit: a single matching report is never enough."""
        a = self.null_step * log_term / 3
        return max(a + float(np.sqrt(a * a + 2 * self.null_var * log_term)), self.unit())

    def _account(self, reports: int, variance: float, step: float) -> None:
        """``reports`` more reports, each adding ``variance`` to a zero-count item's estimate and
        at most ``step`` to any estimate."""
        self.null_var += reports * variance
        if reports:
            self.null_step = max(self.null_step, step)

    def insert(self, reports: Reports) -> None:
        """Validate and insert reports in arrival order; bad ones are counted and dropped."""
        for a, b in version_runs(reports.version):
            info = self.book.get(reports.version[a])
            if info is None:
                self.rejected["version"] += b - a
                continue
            tags, symbols = reports.tag[a:b], reports.symbol[a:b]
            allowed = self.allowed(info, tags)
            ok = allowed & self.valid(info, tags, symbols)
            self.rejected["tag"] += int((~allowed).sum())
            self.rejected["symbol"] += int((allowed & ~ok).sum())
            tags, symbols = np.ascontiguousarray(tags[ok]), np.ascontiguousarray(symbols[ok])
            for t in self.accepted:
                self.accepted[t] += int((tags == t).sum())
            self._insert_run(info, tags, symbols)

    def top(self, k: int, exclude: int) -> list[tuple[int, float]]:
        """Up to ``k`` (item, estimate) with estimate > 0, largest first, ties by item; ``exclude``
        (the "other" item) is never listed."""
        ids, est = self.estimates()
        rows = sorted((-float(e), int(i)) for i, e in zip(ids, est) if i != exclude and e > 0)
        return [(i, -e) for e, i in rows[:k]]
