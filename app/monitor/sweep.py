"""What-if sweeps on recorded traffic (headless; runs on its own thread).

For each value of one parameter (ε, k~ as a multiple of k, or the window w) and each repetition,
a fresh instance of the algorithm reads the recorded packets; every release is compared with the
exact answer over its own span (``recording.resolve_span`` / ``slice_truth``, the live panels' rules)
and recall, precision and ARE are averaged. The instances never touch the live run; their
outputs are for tuning and are not published anywhere.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.clock import TimeGrid
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.facts import NO_FACTS, Provenance, PublicFacts
from dptop.engine.core.settings import PACKETS, Counting, Settings
from dptop.engine.core.status import DetectionLimit

from dptop.monitor.recording import Recording, resolve_span
from dptop.monitor.truth import slice_truth, utility_of

PARAMETERS = {"epsilon": "ε", "k_tilde": "k~ / k", "window": "window w"}
DEFAULT_VALUES = {"epsilon": "0.1, 0.25, 0.5, 0.75, 0.9", "k_tilde": "1.5, 2, 4, 8", "window": "1000, 4000, 16000"}
BATCH = 1 << 14
EVALUATED = 10  # releases per run compared with the truth (the most recent ones)


@dataclass(frozen=True)
class SweepPoint:
    """The averages at one value over the evaluated releases; NaN where a metric had nothing to
    measure in any of them, as in the panels: recall without a true heavy hitter, precision and
    ARE without a released item (``reported`` = 0: nothing released is not a perfect score)."""

    value: float
    recall: float
    precision: float
    are: float
    releases: int
    reported: int = 0  # items released over the evaluated releases

    def label(self) -> str:
        """The point as the tuning panel lists it ("—" where a metric is NaN)."""
        def fmt(x, spec):
            return "—" if np.isnan(x) else format(x, spec)

        why = "; nothing released" if self.reported == 0 else ""
        return (f"{self.value:g}  (recall {fmt(self.recall, '.2f')}, precision {fmt(self.precision, '.2f')}, "
                f"ARE {fmt(self.are, '.1%')}{why})")


def mean_defined(utilities, metric: str) -> float:
    """The mean of ``metric`` over the releases where it measures something (NaN if none)."""
    need = "true_heavy" if metric == "recall" else "reported"
    values = [getattr(u, metric) for u in utilities if getattr(u, need) > 0]
    return float(np.mean(values)) if values else float("nan")


def settings_for(base: Settings, parameter: str, value: float) -> Settings:
    if parameter == "epsilon":
        return base.with_(epsilon=float(value))
    if parameter == "k_tilde":
        return base.with_(k_tilde=max(base.k + 1, int(round(value * base.k))))
    if parameter == "window":
        return base.with_(window=int(value))
    raise ValueError(f"parameter ({parameter!r}) must be one of {', '.join(PARAMETERS)}")


def detection_limits(name: str, base: Settings, parameter: str, values, facts: PublicFacts = NO_FACTS,
                     counting: Counting = PACKETS) -> list[tuple[float, DetectionLimit | None]]:
    """``name``'s a-priori detection limit (``Algorithm.detectable``: count, share, error, over)
    at each value of ``parameter``, from the parameters in ``base`` and the public ``facts`` alone: no
    packet is read, so the curve is there before any data and costs no privacy. A value the
    algorithm refuses gets no count, and its reason as the ``note``."""
    out = []
    for value in values:
        try:
            settings = registry.get(name).with_defaults(settings_for(base, parameter, value), facts, counting)
            limit = registry.make(name, settings, facts, counting).detectable()
            limit = None if limit is None else limit.explained()
        except ValueError as exc:
            limit = DetectionLimit(None, None, None, "", note=str(exc))
        out.append((float(value), limit))
    return out


def parse_values(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"values ({text!r}) must be numbers separated by commas") from None
    if not values:
        raise ValueError("values: give at least one number")
    return values


class Sweep:
    def __init__(self, name: str, base: Settings, parameter: str, values, keys: np.ndarray, ts: np.ndarray,
                 repetitions: int = 3, counting: Counting = PACKETS):
        if len(keys) == 0:
            raise ValueError("no recorded packets yet: start a source first")
        # the recording's own length and range: the runs are for tuning and are never published
        facts = PublicFacts.of(len(keys))
        self.rec = Recording(len(keys))
        if base.epoch_seconds is not None:  # the recording's own range, on the live run's grid rule
            facts = PublicFacts.of(len(keys), (int(ts.min()), int(ts.max()) + 1), range_provenance=Provenance.ASSUMED)
            cells = TimeGrid.over(*facts.span, base.epoch_seconds).cell_of(ts)
            cuts = np.flatnonzero(np.diff(cells)) + 1
            for a, b in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(cells)]))):
                self.rec.append(KeyBatch(keys[a:b], ts[a:b], epoch=int(cells[a])))
        else:
            self.rec.append(KeyBatch(keys, ts))
        self.facts, self.counting = facts, counting
        for v in values:  # fail now, with the algorithm's own message, not in the thread
            registry.make(name, settings_for(base, parameter, v), facts, counting)
        self.name, self.base, self.parameter, self.values = name, base, parameter, list(values)
        self.keys, self.ts, self.repetitions = keys, ts, int(repetitions)
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self.points: list[SweepPoint] = []
        self.progress = 0.0
        self.error: str | None = None
        self.done = False
        self.thread = threading.Thread(target=self._run, name="dptop-sweep", daemon=True)

    def start(self) -> "Sweep":
        self.thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

    def result(self) -> tuple[list[SweepPoint], float, bool, str | None]:
        with self._lock:
            return list(self.points), self.progress, self.done, self.error

    def _run(self) -> None:
        try:
            total = len(self.values) * self.repetitions
            for i, value in enumerate(self.values):
                settings = settings_for(self.base, self.parameter, value)
                utilities = []
                for r in range(self.repetitions):
                    releases = self._one_run(settings)
                    if releases is None:
                        return
                    utilities += [self._evaluate(rel, settings) for rel in releases[-EVALUATED:]]
                    with self._lock:
                        self.progress = (i * self.repetitions + r + 1) / total
                if utilities:
                    point = SweepPoint(value, *(mean_defined(utilities, m) for m in ("recall", "precision", "are")),
                                       len(utilities), sum(u.reported for u in utilities))
                    with self._lock:
                        self.points.append(point)
        except Exception as exc:  # noqa: BLE001 - shown in the tuning panel
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True

    def _one_run(self, settings: Settings):
        algorithm = registry.make(self.name, settings, self.facts, self.counting)
        releases = []
        for start in range(0, len(self.keys), BATCH):
            if self._cancel.is_set():
                return None
            releases += algorithm.consume(KeyBatch(self.keys[start:start + BATCH], self.ts[start:start + BATCH]))
        releases += algorithm.finish()
        return [r for r in releases if r.span.end > r.span.start or r.span.t_start is not None]

    def _evaluate(self, release, settings: Settings):
        a, b = resolve_span(release, 0, self.rec, finished=True)
        counts, heavy, _ = slice_truth(release, self.keys[a:b], settings.k, settings.gamma)
        return utility_of(release, counts, heavy)
