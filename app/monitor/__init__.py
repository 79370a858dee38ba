"""The headless monitor: one session owns the source, the runners, the public clock, ground truth,
the privacy ledger and the JSON/export. The CLI (dptop.headless) and the GUI (dptop.gui) are
views over it; it never imports either of them, nor Qt."""
