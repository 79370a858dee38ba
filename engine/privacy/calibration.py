"""Calibration for what a packet counts as: the per-update settings under which an algorithm's
releases hold the requested cost **per packet** when one packet is up to G updates (bytes).

An algorithm states what its settings request (``requested_cost``, default (ε, δ) of the
settings) and how a cost maps back to settings (``settings_for_cost``, default ε and δ); the
per-update cost is ``measures.calibrate_group(requested, G)``, so ``group(per-update, G)`` -- what
``Guarantee.counted`` states -- is the requested cost. Classes whose releases ignore repeated
updates (``repeats_free``: a host's distinct pairs) run unchanged.
"""
from __future__ import annotations

from dptop.engine.core.settings import Counting, Settings
from dptop.engine.privacy.measures import ApproxDP, Measure, calibrate_group


def requested_cost(cls, settings: Settings) -> Measure:
    hook = getattr(cls, "requested_cost", None)
    return hook(settings) if hook is not None else ApproxDP(settings.epsilon, settings.delta)


def per_update(cls, settings: Settings, counting: Counting) -> Settings:
    """``settings`` for algorithm class ``cls`` counting packets as ``counting`` (up to
    ``counting.cap`` updates per packet)."""
    if counting.cap <= 1 or not cls.private or getattr(cls, "repeats_free", False):
        return settings
    cost = calibrate_group(requested_cost(cls, settings), counting.cap)
    hook = getattr(cls, "settings_for_cost", None)
    return hook(settings, cost) if hook is not None else settings.with_(epsilon=cost.epsilon, delta=cost.delta)
