"""The cells of the product conformance matrix (dptop.lab.product_matrix): its axes, a ``Cell``
(surface × algorithm × key kind × weight × neighbour kind × range path), the run configuration a
cell sets, and a cell's ``Verdict``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.lab.matrix_captures import EPOCHS, SECOND, T0
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec

SURFACES = ("publish", "metrics", "capture", "lines", "timing", "top", "seeded")
STATEMENTS = ("top", "seeded")
"""Surfaces checked for a statement every run must make (the ledger's sequential cost, NOT
private), not for a difference between the sides."""
KEYS = ("src", "dst")
WEIGHTS = ("packets", "bytes")
PATHS = ("declared", "default")
COUNT_EPOCHS = "count-epochs"
"""The path of ``--epoch-packets`` instead of a time grid: refused with private algorithms on the
surfaces that pace releases (``PACED``), where an epoch's close or an output step would follow
the packet count."""
PACED = ("capture", "lines", "timing")
COUNT_EPOCH_PACKETS = 300
"""Packets an epoch of that path holds (a quarter of the capture)."""
ADDRESS_ONLY = ("hostdp-dst", "hostdp-src")


def private_algorithms() -> tuple[str, ...]:
    return tuple(n for n in registry.names() if registry.get(n).private)


@dataclass(frozen=True)
class Cell:
    surface: str
    algorithm: str
    key: str = "src"
    weight: str = "packets"
    neighbour: str = "removed-middle"
    path: str = "declared"

    def label(self) -> str:
        return f"{self.surface}/{self.algorithm}/{self.key}/{self.weight}/{self.neighbour}/{self.path}"


@dataclass
class Verdict:
    cell: Cell
    runs: int
    fields: tuple[str, ...]  # constant within each side, different between them
    facts: tuple[str, ...]  # public facts the view names whose values differ between the sides
    seconds: float
    error: str = ""

    @property
    def violation(self) -> bool:
        return bool(self.error) or (bool(self.fields) and not self.facts)

    def row(self) -> str:
        verdict = ("ERROR " + self.error if self.error else "VIOLATION" if self.violation else
                   f"named fact ({', '.join(self.facts)})" if self.fields else "no violation")
        shown = f" e.g. {self.fields[0]}" if self.fields and self.violation else ""
        return f"{self.cell.label():62s} {self.runs}x2 {self.seconds:6.1f}s  {verdict}{shown}"


def settings(cell: Cell, seed: int | None) -> Settings:
    extra = {"m": 8} if cell.algorithm in ADDRESS_ONLY else {}
    epochs = ({"epoch_packets": COUNT_EPOCH_PACKETS, "epoch_seconds": None} if cell.path == COUNT_EPOCHS
              else {"epoch_seconds": 1.0})
    return Settings(k=4, k_tilde=16, epsilon=0.5, delta=1e-6, seed=seed, window=400, extra=extra, **epochs)


def config(cell: Cell, seed: int | None) -> RunConfig:
    return RunConfig((cell.algorithm,), settings(cell, seed), counting=CountingChoice(key=cell.key, weight=cell.weight))


def spec(cell: Cell, path: Path, speed: float | None = None) -> SourceSpec:
    declared = (T0, T0 + EPOCHS * SECOND) if cell.path == "declared" else None
    return SourceSpec("file", path=str(path), time_range=declared, speed=speed, lateness=0.05)
