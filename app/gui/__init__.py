"""The dptop monitor window (PySide6 + pyqtgraph). Only ``app`` imports Qt; ``session``,
``truth`` and ``sweep`` here are headless helpers that run engine work on their own threads.

Importing this package applies ``_pin_singletons`` (see there) before any Qt call is made.
"""
from __future__ import annotations

import sys
from importlib import metadata

BROKEN_PYSIDE = ("6.12.0",)
"""PySide6 releases whose wrappers drop one reference to ``None`` on every call of a C++ method
that returns void (measured: 100 calls of ``QObject.setObjectName`` lower ``sys.getrefcount(None)``
by 100; ~30 000 calls abort the interpreter with "none_dealloc"). Python >= 3.12 is immune
(PEP 683: None is immortal)."""


def _pin_singletons() -> bool:
    """On CPython < 3.12 with a broken PySide6, raise the reference counts of None, True and
    False by 2^40, which is what CPython 3.12 does for them (immortal objects): a dropped
    reference can then never free them. Returns True when applied."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    try:
        version = metadata.version("PySide6-Essentials")
    except metadata.PackageNotFoundError:
        try:
            version = metadata.version("PySide6")
        except metadata.PackageNotFoundError:
            return False
    if version not in BROKEN_PYSIDE:
        return False
    import ctypes

    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40  # ob_refcnt is PyObject's first field
    return True


PINNED = _pin_singletons()
