"""The dptop monitor window (PySide6 + pyqtgraph): its views, panels and menus. The work they show
runs headless in dptop.monitor (``session``, ``truth``, ``sweep``: engine work on their own
threads), which imports no Qt."""
