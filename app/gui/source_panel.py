"""Source bar: a capture file, a live interface (with a BPF filter) or a synthetic Zipf stream;
start, pause, stop; replay speed and loop (synthetic streams only); progress, packets/s and drops
always visible, and what a starting session is doing (compiling kernels...). The chosen source
and its fields are kept in the window's ``QSettings`` (``save`` / ``restore``)."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout, QLineEdit, QProgressBar,
                               QPushButton, QSizePolicy, QSpinBox, QStackedWidget, QWidget)

from dptop.gui.elide import ElidedLabel
from dptop.gui.help import TIPS
from dptop.monitor.config import SourceSpec
from dptop.monitor.explain import Drops, drops_of
from dptop.monitor.states import State

SPEEDS = (("1×", 1.0), ("2×", 2.0), ("10×", 10.0), ("100×", 100.0), ("max", None))
KINDS = ("Capture file", "Interface", "Synthetic")
KIND_KEYS = ("file", "live", "synth")  # SourceSpec.kind of each entry of KINDS
SYNTH = KIND_KEYS.index("synth")
WIDEST_DROPS = Drops(99_999, 9_999, 9_999, 0, 9_999_999)
"""Drops as large as the status line is made wide enough for, whole (larger ones elide; the tooltip has them)."""
LOOP_TIP = ("Loop: start the synthetic stream over at its end. Offered for synthetic streams only: looping a "
            "real capture repeats every real packet, and the per-packet privacy guarantee cannot absorb "
            "the repeats (each pass would multiply what the releases reveal about those packets).")


def _interfaces() -> list[str]:
    try:
        from dptop.capture.live import list_interfaces

        return list_interfaces()
    except OSError:
        return []


class SourcePanel(QWidget):
    start_requested = Signal(object)  # SourceSpec
    pause_toggled = Signal()
    stop_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.kind = QComboBox()
        self.kind.addItems(KINDS)
        self.path = QLineEdit()
        self.path.setPlaceholderText("pcap / pcapng file (or drop one on the window)")
        self.browse = QPushButton("Open…")
        self.iface = QComboBox()
        self.iface.addItems(_interfaces())
        self.bpf = QLineEdit()
        self.bpf.setPlaceholderText("BPF filter")
        self.bpf.setToolTip(TIPS["bpf"])
        self.skew = QDoubleSpinBox()
        self.skew.setRange(0.1, 5.0)
        self.skew.setSingleStep(0.1)
        self.skew.setValue(1.1)
        self.skew.setPrefix("skew ")
        self.domain = QSpinBox()
        self.domain.setRange(1, 1 << 30)
        self.domain.setValue(1 << 16)
        self.domain.setPrefix("sources ")
        self.length = QSpinBox()
        self.length.setRange(1, 1 << 26)
        self.length.setValue(1 << 18)
        self.length.setPrefix("packets ")
        self.seed = QSpinBox()
        self.seed.setRange(0, 1 << 30)
        self.seed.setValue(1)
        self.seed.setPrefix("seed ")

        self.stack = QStackedWidget()
        for widgets in ((self.path, self.browse), (self.iface, self.bpf), (self.skew, self.domain, self.length, self.seed)):
            page = QWidget()
            row = QHBoxLayout(page)
            row.setContentsMargins(0, 0, 0, 0)
            for w in widgets:
                row.addWidget(w, 1 if isinstance(w, QLineEdit) else 0)
            self.stack.addWidget(page)
        self.kind.currentIndexChanged.connect(self._show_page)
        self._show_page(0)
        self.kind.currentIndexChanged.connect(lambda i: self.loop.setEnabled(i == SYNTH))
        self.kind.currentIndexChanged.connect(lambda i: self.speed.setEnabled(KIND_KEYS[i] != "live"))

        self.speed = QComboBox()
        for label, _ in SPEEDS:
            self.speed.addItem(label)
        self.speed.setToolTip(TIPS["speed"])
        self.loop = QCheckBox("loop")
        self.loop.setEnabled(False)
        self.loop.setToolTip(LOOP_TIP)
        self.start = QPushButton("Start")
        self.start.setToolTip("Start (or restart) reading the source (Ctrl+R)")
        self.pause = QPushButton("Pause")
        self.pause.setToolTip("Pause / resume (P)")
        self.stop = QPushButton("Stop")
        self.stop.setToolTip("Stop reading (Ctrl+.)")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(140)
        self.progress.setTextVisible(True)
        self.stats = ElidedLabel(2, wrap=True)  # two lines; the tooltip has the whole text
        self.stats.set_plain("idle")
        self.stats.setMinimumWidth(self.stats.fontMetrics().horizontalAdvance(WIDEST_DROPS.text()) + 12)

        row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 4, 2)
        for w in (self.kind, self.stack, self.speed, self.loop, self.start, self.pause, self.stop, self.progress,
                  self.stats):
            row.addWidget(w, 2 if w is self.stack else 3 if w is self.stats else 0)
        self.browse.clicked.connect(self.choose_file)
        self.start.clicked.connect(lambda: self.start_requested.emit(self.spec()))
        self.pause.clicked.connect(self.pause_toggled.emit)
        self.stop.clicked.connect(self.stop_requested.emit)
        self._last = None

    def _show_page(self, index: int) -> None:
        """Show the fields of source kind ``index``; only the shown page counts for the bar's size
        (the synthetic stream's four fields do not widen the bar while a file is chosen)."""
        for i in range(self.stack.count()):
            policy = QSizePolicy.Policy.Preferred if i == index else QSizePolicy.Policy.Ignored
            self.stack.widget(i).setSizePolicy(policy, policy)
        self.stack.setCurrentIndex(index)
        self.stack.adjustSize()

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a capture", self.path.text(),
                                              "Captures (*.pcap *.pcapng *.cap *.gz);;All files (*)")
        if path:
            self.set_file(path)
            self.start_requested.emit(self.spec())

    def set_file(self, path: str) -> None:
        self.kind.setCurrentIndex(0)
        self.path.setText(path)

    def set_speed(self, speed: float | None) -> None:
        """Select ``speed`` (one of ``SPEEDS``' values; None = as fast as possible)."""
        values = [v for _, v in SPEEDS]
        if speed not in values:
            raise ValueError(f"replay speed ({speed!r}) must be one of {values}")
        self.speed.setCurrentIndex(values.index(speed))

    def spec(self) -> SourceSpec:
        speed = SPEEDS[self.speed.currentIndex()][1]
        kind = KIND_KEYS[self.kind.currentIndex()]
        return SourceSpec(kind, path=self.path.text().strip() or None, speed=speed,
                          loop=self.loop.isChecked() and kind == "synth",
                          iface=self.iface.currentText() or None, bpf=self.bpf.text().strip() or None,
                          skew=self.skew.value(), domain=self.domain.value(), length=self.length.value(),
                          seed=self.seed.value())

    def show_state(self, snap) -> None:
        """Progress, packets/s and drops from a ``SessionSnapshot`` (or None: no session)."""
        if snap is None:
            self.stats.set_plain("idle — open a capture, pick an interface or a synthetic stream")
            self.progress.setRange(0, 1000)
            self.progress.setValue(0)
            return
        src = snap.source
        self.pause.setText("Resume" if snap.state is State.PAUSED else "Pause")
        if src is None:
            starting = snap.state is State.STARTING
            self.progress.setRange(0, 0 if starting else 1000)  # busy while starting: nothing to measure yet
            text = snap.error or (f"starting: {snap.phase or 'opening the source'}" if starting else f"{snap.state}…")
            self.stats.set_plain(text)
            return
        pps = 0.0
        if self._last is not None and snap.time > self._last[0]:
            pps = (src.ip_packets - self._last[1]) / (snap.time - self._last[0])
        if self._last is None or snap.time - self._last[0] >= 0.5:
            self._last = (snap.time, src.ip_packets)
            self._pps = pps
        if src.fraction is not None:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * src.fraction))
            self.progress.setFormat(f"{src.fraction:.0%}")
        else:
            self.progress.setRange(0, 0) if snap.state is State.RUNNING else self.progress.setRange(0, 1000)
        text = f"{snap.state} · {src.ip_packets:,} pkts · {getattr(self, '_pps', 0.0):,.0f} pkts/s\n{drops_of(snap).text()}"
        if snap.error:
            text += f" · {snap.error}"
        self.stats.set_plain(text)

    # ----- persistence (QSettings, as the window's other settings) ---------------------------
    def save(self, store) -> None:
        """Remember the source kind and every field of every kind."""
        store.setValue("source/kind", KIND_KEYS[self.kind.currentIndex()])
        for key, value in (("path", self.path.text()), ("speed", self.speed.currentIndex()),
                           ("loop", self.loop.isChecked()), ("iface", self.iface.currentText()),
                           ("bpf", self.bpf.text()), ("skew", self.skew.value()), ("domain", self.domain.value()),
                           ("length", self.length.value()), ("seed", self.seed.value())):
            store.setValue(f"source/{key}", value)

    def restore(self, store) -> None:
        """The fields ``save`` wrote (values that no longer parse or fit keep the defaults)."""
        def value(key, cast, default):
            try:
                return cast(store.value(f"source/{key}", default))
            except (TypeError, ValueError):
                return default

        self.path.setText(str(store.value("source/path", "") or ""))
        self.speed.setCurrentIndex(min(max(value("speed", int, 4), 0), len(SPEEDS) - 1))
        self.bpf.setText(str(store.value("source/bpf", "") or ""))
        iface = str(store.value("source/iface", "") or "")
        if self.iface.findText(iface) >= 0:
            self.iface.setCurrentText(iface)
        for box, key, cast in ((self.skew, "skew", float), (self.domain, "domain", int), (self.length, "length", int),
                               (self.seed, "seed", int)):
            box.setValue(value(key, cast, box.value()))
        kind = str(store.value("source/kind", "file"))
        self.kind.setCurrentIndex(KIND_KEYS.index(kind) if kind in KIND_KEYS else 0)
        self.loop.setChecked(str(store.value("source/loop", "false")).lower() == "true")

    def reset_rate(self) -> None:
        self._last = None
        self._pps = 0.0
