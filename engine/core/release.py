"""Typed results: every algorithm's ``release()`` returns a frozen ``Release``.

A ``Release`` names the algorithm, the span of the stream it covers, the items with their
estimates (already thresholded), the threshold applied and, for private algorithms, the
``Guarantee`` it was produced under (``dptop.engine.privacy.guarantee``, not imported here: the
privacy package builds on the core: results are typed, not bare tuples).
``to_json()`` gives the CLI's JSON contract.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dptop.engine.core.keys import decode_key
from dptop.engine.core.status import NO_FIGURES, ReleaseStatus

MODEL_NONE = "non-private"
MODEL_SINGLE = "single release per epoch"
MODEL_CONTINUAL = "continual observation"
MODEL_WINDOW = "sliding window"


@dataclass(frozen=True)
class Span:
    """The part of the stream a release covers: packets ``[start, end)`` (0-based arrival
    index) and, when known, the packet-time interval ``[t_start, t_end]`` in seconds."""

    start: int
    end: int
    kind: str = "stream"  # "stream", "epoch", "window", "prefix"
    index: int = 0  # epoch number, horizon number, ...
    t_start: float | None = None
    t_end: float | None = None

    @property
    def packets(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ReleasedItem:
    """One reported item: its key, its address label and its (private or exact) estimate."""

    hi: int
    lo: int
    estimate: float
    prefix: int | None = None
    """Prefix length when the item is a network, not one address (e.g. 64 for an IPv6 /64 of the
    DPSW hierarchy); ``None`` for a single address."""

    @property
    def address(self) -> str:
        if self.prefix is None:
            return decode_key(self.hi, self.lo)
        mapped = self.hi == 0 and (self.lo >> 32) == 0xFFFF and self.prefix >= 96
        return f"{decode_key(self.hi, self.lo)}/{self.prefix - 96 if mapped else self.prefix}"

    def to_json(self) -> dict:
        return {"address": self.address, "estimate": self.estimate}


@dataclass(frozen=True)
class Release:
    """One output of one algorithm.

    ``items`` is ordered by estimate descending, ties by key (a function of released data only,
    never of true counts or slot order: docs/dpss-eehh.md P12). ``threshold`` is the value an item's
    estimate had to exceed (``None`` for plain top-k baselines). ``status`` carries public,
    display-only facts such as the noisy stream length or the packets still needed before
    anything can pass the threshold (a ``ReleaseStatus`` of the algorithm's family,
    dptop.engine.core.status).
    """

    algorithm: str
    span: Span
    items: tuple[ReleasedItem, ...]
    threshold: float | None = None
    guarantee: Guarantee | None = None
    status: ReleaseStatus = NO_FIGURES
    released_before: int = 0
    """Releases of empty epochs published in bulk just before this one and held by no view
    (dptop.engine.single_release.epochs); counted with it."""

    @property
    def private(self) -> bool:
        return self.guarantee is not None

    @property
    def suppressed(self) -> str:
        """Why this release was withheld as a whole ('' when it was not; e.g. an EEHH epoch too long
        for its public cap)."""
        return self.status.suppressed

    def top(self, n: int) -> tuple[ReleasedItem, ...]:
        return self.items[:n]

    def to_json(self) -> dict:
        return {
            "algorithm": self.algorithm,
            "span": self.span.to_json(),
            "threshold": self.threshold,
            "items": [it.to_json() for it in self.items],
            "guarantee": None if self.guarantee is None else self.guarantee.to_json(),
            "status": self.status.to_json(),
        }


def sorted_items(his, los, estimates, limit: int | None = None) -> tuple[ReleasedItem, ...]:
    """Items ordered by estimate descending, ties broken by key ascending (P12-safe). With a
    ``limit``, a partial selection keeps the work linear in the number of items (a live view of
    millions of exact counts must not sort them all)."""
    his = np.asarray(his, dtype=np.uint64)
    los = np.asarray(los, dtype=np.uint64)
    est = np.asarray(estimates, dtype=np.float64)
    if limit is not None and len(est) > limit:
        if limit <= 0:
            return ()
        kth = np.partition(est, len(est) - limit)[len(est) - limit]  # the limit-th largest estimate
        keep = np.flatnonzero(est >= kth)
        his, los, est = his[keep], los[keep], est[keep]
    order = np.lexsort((los, his, -est))[:limit]
    return tuple(ReleasedItem(int(h), int(l), float(e))
                 for h, l, e in zip(his[order].tolist(), los[order].tolist(), est[order].tolist()))
