"""One-line explanations of the DP terms (tooltips) and the shortcuts help overlay (F1 or ?)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

TIPS = {
    "epsilon": "ε: privacy loss bound per packet; smaller = more private, noisier estimates.",
    "delta": "δ: small probability that the ε bound may fail (e.g. a rare label slips through); keep it far below 1/n.",
    "rho": "ρ: zero-concentrated DP parameter (Gaussian noise); ρ-zCDP implies (ρ + 2√(ρ ln 1/δ), δ)-DP.",
    "k": "k: report sources above n/k packets (at most k heavy hitters).",
    "k_tilde": "k~: counters / candidates the algorithms track (more = better recall, higher threshold). Blank = each algorithm's default; k_tilde=N in an algorithm's options sets its own.",
    "epoch": "Single-release algorithms publish once per epoch; each epoch uses the full (ε, δ) on disjoint packets.",
    "window": "w: the sliding window covers the last w packets. Blank = algorithm default; window=N in an algorithm's options sets its own.",
    "gamma": "γ: sliding-window heavy-hitter fraction: report sources above γ·w. Blank = algorithm default.",
    "horizon": "T_max: continual-observation algorithms are calibrated for this many packets (blank = file length or 2^30).",
    "restart": "Restart: a fresh instance (new noise, counts from 0) every T_max packets instead of stopping there.",
    "seed": "Seed: reproducible noise for testing; the output is then NOT private.",
    "extra": "Algorithm options as name=value, comma separated (as the CLI's --param).",
    "estimate": "Private estimate: the algorithm's noisy count; safe to show and share under the stated guarantee.",
    "true count": "True count: exact packets from this source over the same span (non-private, for comparison only).",
    "threshold": "Threshold τ: a source is released only if its noisy count exceeds τ; this hides rare sources.",
    "model": "Single release per epoch, continual observation (an output after every packet) or sliding window.",
    "measure": "Pure DP (ε), approximate DP (ε, δ) or zCDP (ρ).",
    "neighbouring": "What the guarantee hides: adding/removing one packet, or changing one packet's source.",
    "scope": "Over which packets the budget holds (an epoch, the horizon T, the last w packets).",
    "composition": "Sequential composition: algorithms reading the same packets add up their ε, δ (and ρ).",
    "freeze": "Freeze (Space): rows stop moving so you can read them; sorting and scrolling still work.",
    "recall": "Recall: share of the true heavy hitters that were released.",
    "precision": "Precision: share of released sources that are true heavy hitters.",
    "are": "ARE: average relative error |estimate − true| / true of the released sources.",
    "speed": "Replay speed in capture time: 1× follows the packet time stamps, 'max' feeds as fast as possible.",
    "bpf": "BPF capture filter (tcpdump syntax), e.g. 'ip and not port 22'.",
    "record": "Packets kept for the truth and the what-if sweeps (the most recent ones).",
}

SHORTCUTS = (
    ("Ctrl+O", "open a capture file (or drop one on the window)"),
    ("Ctrl+R", "start / restart the source"),
    ("P", "pause / resume"),
    ("Ctrl+.", "stop"),
    ("Space", "freeze / unfreeze the tables and charts"),
    ("Ctrl+Return", "apply the parameters"),
    ("Ctrl+E", "export the private releases (CSV + JSON)"),
    ("Ctrl+Shift+E", "save the throughput plot as PNG"),
    ("F1 or ?", "this help; Esc closes it"),
    ("Ctrl+Q", "quit"),
)


def help_html() -> str:
    keys = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in SHORTCUTS)
    terms = "".join(f"<li>{TIPS[t]}</li>" for t in ("epsilon", "delta", "rho", "threshold", "neighbouring",
                                                    "composition", "estimate", "true count"))
    return (
        "<h2>dptop — private top talkers</h2>"
        "<p>Each panel is one algorithm. Private panels show only what their release published, "
        "with the guarantee it holds under; the true counts beside them are the exact, non-private answer "
        "over the same packets, for comparison.</p>"
        f"<h3>Keys</h3><table cellspacing='6'>{keys}</table>"
        f"<h3>Terms</h3><ul>{terms}</ul><p><i>Press Esc or F1 to close.</i></p>")


class HelpOverlay(QWidget):
    """A translucent panel over the window's central area; follows its parent's size."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setObjectName("helpOverlay")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet("#helpOverlay { background: rgba(20, 20, 28, 225); }"
                           "QLabel { color: #f0f0f0; font-size: 11pt; }")
        label = QLabel(help_html())
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        area = QScrollArea()  # a short window scrolls the help instead of cutting it
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setStyleSheet("background: transparent;")
        area.viewport().setAutoFillBackground(False)
        label.setAutoFillBackground(False)
        area.setWidget(label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(32, 16, 32, 16)
        layout.addWidget(area)
        self.hide()
        parent.installEventFilter(self)

    def eventFilter(self, obj, event):
        if obj is self.parent() and event.type() == QEvent.Type.Resize:
            self.setGeometry(self.parent().rect())
        return False

    def toggle(self) -> None:
        if self.isVisible():
            self.hide()
        else:
            self.setGeometry(self.parent().rect())
            self.raise_()
            self.show()

    def mousePressEvent(self, event):
        self.hide()
