"""The dptop monitor window (PySide6 + pyqtgraph). Only ``app`` imports Qt; ``session``,
``truth`` and ``sweep`` here are headless helpers that run engine work on their own threads."""
