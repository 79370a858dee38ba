"""The private view of a session: what may leave dptop (the export, the ``--serve`` feed).

One builder, ``private_view(session)``: the releases of the private algorithms with the guarantee
each was published under, the ledger, what a key is and the public facts the guarantees take as
given. No exact figure (no ground truth, no packet or drop count, no non-private algorithm, no
release span in packets, which under time epochs is an exact count) is in it.
"""
from __future__ import annotations

from dataclasses import dataclass

from dptop import __version__
from dptop.engine.core.keykinds import KeyKind
from dptop.engine.core.release import Guarantee, Release


@dataclass(frozen=True)
class PrivateAlgorithm:
    """One private algorithm's published releases (oldest first) under its current guarantee."""

    name: str
    guarantee: Guarantee | None
    published: int
    releases: tuple[Release, ...]

    @property
    def latest(self) -> Release | None:
        return self.releases[-1] if self.releases else None


@dataclass(frozen=True)
class PrivateView:
    """The private view at one moment. ``scale`` turns a counted unit into what is shown (bytes
    per unit with ``--weight bytes``, else 1)."""

    key_kind: KeyKind
    counting: str
    weight: str
    scale: int
    algorithms: tuple[PrivateAlgorithm, ...]
    budget: dict | None
    public: dict

    def to_json(self) -> dict:
        """The shareable JSON (contract: ``algorithms.NAME.{guarantee, releases_published,
        releases_dropped_from_memory, releases}``, ``budget``, ``counting``, ``public``)."""
        from dptop.monitor.result import release_json
        algorithms = {a.name: {"guarantee": None if a.guarantee is None else a.guarantee.to_json(),
                               "releases_published": a.published,
                               "releases_dropped_from_memory": max(0, a.published - len(a.releases)),
                               "releases": [_private_release(release_json(r, self.scale)) for r in a.releases]}
                      for a in self.algorithms}
        return {"dptop": __version__, "algorithms": algorithms, "budget": self.budget, "counting": self.counting,
                "key": {"kind": self.key_kind.value, "label": self.key_kind.label}, "weight": self.weight,
                "public": self.public}


def _private_release(out: dict) -> dict:
    """A release's JSON without its span's packet positions (an exact count under time epochs)."""
    span = out["span"]
    out["span"] = {k: span[k] for k in ("kind", "index", "t_start", "t_end") if k in span}
    return out


def private_view(session) -> PrivateView:
    """The private view of ``session`` (a ``dptop.monitor.session.Session``) now."""
    from dptop.monitor.result import public_json
    snap = session.snapshot()
    c = session.config.counting
    algorithms = []
    for v in snap.lanes:
        if v.algorithm is None or not v.algorithm.private:
            continue
        rels = tuple(r for r in session.releases(v.name) if r.guarantee is not None)
        algorithms.append(PrivateAlgorithm(v.name, v.algorithm.guarantee, v.algorithm.releases, rels))
    return PrivateView(c.kind, c.describe(), c.weight, c.unit if c.weight == "bytes" else 1, tuple(algorithms),
                       snap.budget, public_json(session))
