"""Parameters panel: the enabled algorithms, the shared settings (ε, δ, k, k~, epoch, window,
horizon, ...) and per-algorithm options, validated as you type.

Validation parses the fields and then constructs each enabled algorithm with the resulting
``Settings`` (constructors validate and allocate, no numba work), so the reason shown is the
algorithm's own message naming the parameter, the value and the rule. ``applied`` carries the
new ``RunConfig``; the window hands it to the session, which restarts only what it affects.
"""
from __future__ import annotations


from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QListWidget,
                               QListWidgetItem, QPushButton, QVBoxLayout, QWidget)

from dptop.gui.drilldown import CountingPicker
from dptop.gui.help import TIPS
from dptop.monitor import catalogue
from dptop.monitor.config import RunConfig, config_errors, placeholder_facts
from dptop.engine.core.settings import Settings, parse_param

EPOCH_MODES = ("whole stream", "packets", "seconds")


def _number(label: str, text: str, cast, optional: bool = False):
    text = text.strip()
    if not text:
        if optional:
            return None
        raise ValueError(f"{label} is empty; give a number")
    try:
        return cast(text)
    except ValueError:
        kind = "an integer" if cast is int else "a number"
        raise ValueError(f"{label} ({text!r}) must be {kind}") from None


def parse_extra(text: str) -> dict:
    """``"depth=5, option=B"`` -> ``{"depth": 5, "option": "B"}`` (the CLI's --param rules)."""
    out = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, value = parse_param(part)
        out[name] = value
    return out


def format_extra(extra: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in extra.items())


def running_epochs_text(applied: Settings, running: Settings | None) -> str:
    """What the run on screen does with epochs where it differs from the applied Epoch field ('' where
    it does not): a capture that does not end (a live interface, a looped stream) releases on epochs
    of the public clock even when the field says "whole stream" (the session's own settings)."""
    if running is None or (running.epoch_seconds, running.epoch_packets) == (applied.epoch_seconds,
                                                                             applied.epoch_packets):
        return ""
    if running.epoch_seconds is not None:
        why = "" if applied.epoch_seconds or applied.epoch_packets else " (a capture that does not end releases as it runs)"
        return f"This run: epochs of {running.epoch_seconds:g} s of the public clock{why}"
    if running.epoch_packets is not None:
        return f"This run: epochs of {running.epoch_packets:,} packets"
    return "This run: the whole stream"


class ParametersPanel(QWidget):
    applied = Signal(object)  # RunConfig
    validity = Signal(bool)

    def __init__(self, config: RunConfig, parent=None):
        super().__init__(parent)
        self.current = config  # the applied configuration
        self._extras: dict[str, dict] = {n: dict(e) for n, e in config.extras.items()}
        self._extra_texts: dict[str, str] = {n: format_extra(e) for n, e in config.extras.items()}
        self.errors: dict[str, str] = {}
        self.pending: RunConfig | None = None
        self.preview: dict = {}  # name -> Guarantee of the private algorithms as configured in the fields

        self.algorithms = QListWidget()
        self.algorithms.setToolTip("Algorithms to run; each gets a panel. Private ones spend budget on the same packets.")
        for entry in catalogue.entries():
            name = entry.name
            item = QListWidgetItem(f"{name}  ({'private' if entry.private else 'non-private'})")
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setToolTip(entry.summary or name)
            self.algorithms.addItem(item)
        self.algorithms.setMaximumHeight(150)
        self.counting = CountingPicker(config.counting)

        self.epsilon, self.delta, self.k, self.k_tilde = QLineEdit(), QLineEdit(), QLineEdit(), QLineEdit()
        self.epoch_mode, self.epoch_value = QComboBox(), QLineEdit()
        self.epoch_mode.addItems(EPOCH_MODES)
        self.window_w, self.gamma, self.horizon, self.seed = QLineEdit(), QLineEdit(), QLineEdit(), QLineEdit()
        self.restart = QCheckBox("restart every T_max")
        self.extra_for, self.extra = QComboBox(), QLineEdit()
        self.extra_for.addItems(catalogue.names())
        for w, tip in ((self.epsilon, "epsilon"), (self.delta, "delta"), (self.k, "k"), (self.k_tilde, "k_tilde"),
                       (self.epoch_mode, "epoch"), (self.epoch_value, "epoch"), (self.window_w, "window"),
                       (self.gamma, "gamma"), (self.horizon, "horizon"), (self.restart, "restart"),
                       (self.seed, "seed"), (self.extra, "extra"), (self.extra_for, "extra")):
            w.setToolTip(TIPS[tip])
        for w in (self.k_tilde, self.window_w, self.gamma, self.horizon, self.seed):
            w.setPlaceholderText("default")
        self.extra.setPlaceholderText("this algorithm's own, e.g. k_tilde=64, window=4000")

        form = QFormLayout()
        form.addRow("ε (epsilon)", self.epsilon)
        form.addRow("δ (delta)", self.delta)
        form.addRow("k", self.k)
        form.addRow("k~", self.k_tilde)
        epoch = QHBoxLayout()
        epoch.addWidget(self.epoch_mode)
        epoch.addWidget(self.epoch_value)
        form.addRow("Epoch", epoch)
        self.running_epochs = QLabel()  # what the session's clock does when the field does not say it
        self.running_epochs.setWordWrap(True)
        self.running_epochs.setVisible(False)
        form.addRow("", self.running_epochs)
        form.addRow("Window w", self.window_w)
        form.addRow("γ (window)", self.gamma)
        form.addRow("Horizon T_max", self.horizon)
        form.addRow("", self.restart)
        form.addRow("Seed", self.seed)
        form.addRow("Options for", self.extra_for)
        form.addRow("", self.extra)

        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d03030;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Restart the algorithms these settings change (Ctrl+Return)")
        self.revert_button = QPushButton("Revert")
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.apply_button)

        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Algorithms"))
        layout.addWidget(self.algorithms)
        layout.addWidget(self.counting)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addLayout(buttons)
        layout.addStretch(1)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(120)
        self._timer.timeout.connect(self.validate)
        self.set_config(config)
        for w in (self.epsilon, self.delta, self.k, self.k_tilde, self.epoch_value, self.window_w, self.gamma,
                  self.horizon, self.seed):
            w.textChanged.connect(self._changed)
        self.extra.textChanged.connect(self._extra_changed)
        self.extra_for.currentTextChanged.connect(lambda n: self.extra.setText(self._extra_texts.get(n, "")))
        self.epoch_mode.currentIndexChanged.connect(self._changed)
        self.restart.toggled.connect(self._changed)
        self.counting.changed.connect(self._changed)
        self.algorithms.itemChanged.connect(self._changed)
        self.apply_button.clicked.connect(self.apply)
        self.revert_button.clicked.connect(lambda: self.set_config(self.current))

    # ----- fields <-> config -------------------------------------------------------------
    def set_config(self, config: RunConfig) -> None:
        s = config.settings
        self.epsilon.setText(f"{s.epsilon:g}")
        self.delta.setText(f"{s.delta:g}")
        self.k.setText(str(s.k))
        self.k_tilde.setText("" if s.k_tilde is None else str(s.k_tilde))
        if s.epoch_packets is not None:
            self.epoch_mode.setCurrentIndex(1)
            self.epoch_value.setText(str(s.epoch_packets))
        elif s.epoch_seconds is not None:
            self.epoch_mode.setCurrentIndex(2)
            self.epoch_value.setText(f"{s.epoch_seconds:g}")
        else:
            self.epoch_mode.setCurrentIndex(0)
            self.epoch_value.setText("")
        for w, v in ((self.window_w, s.window), (self.gamma, s.gamma), (self.horizon, s.horizon), (self.seed, s.seed)):
            w.setText("" if v is None else f"{v:g}" if isinstance(v, float) else str(v))
        self.restart.setChecked(bool(s.restart))
        self.counting.set_counting(config.counting)
        self._extras = {n: dict(e) for n, e in config.extras.items()}
        self._extra_texts = {n: format_extra(e) for n, e in config.extras.items()}
        self.extra.setText(self._extra_texts.get(self.extra_for.currentText(), ""))
        for i in range(self.algorithms.count()):
            item = self.algorithms.item(i)
            on = item.data(Qt.ItemDataRole.UserRole) in config.names
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self.validate()

    def names(self) -> tuple[str, ...]:
        """The checked algorithms in panel order: the applied ones keep their order (Apply never
        reshuffles the panels), newly checked ones follow in list order."""
        checked = [self.algorithms.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.algorithms.count())
                   if self.algorithms.item(i).checkState() == Qt.CheckState.Checked]
        kept = [n for n in self.current.names if n in checked]
        return tuple(kept + [n for n in checked if n not in kept])

    def parse(self) -> RunConfig:
        """The configuration in the fields; raises ``ValueError`` naming the field."""
        mode = EPOCH_MODES[self.epoch_mode.currentIndex()]
        epoch_packets = epoch_seconds = None
        if mode == "packets":
            epoch_packets = _number("epoch packets", self.epoch_value.text(), int)
        elif mode == "seconds":
            epoch_seconds = _number("epoch seconds", self.epoch_value.text(), float)
        settings = Settings(
            k=_number("k", self.k.text(), int), k_tilde=_number("k~", self.k_tilde.text(), int, True),
            epsilon=_number("epsilon", self.epsilon.text(), float), delta=_number("delta", self.delta.text(), float),
            seed=_number("seed", self.seed.text(), int, True), epoch_packets=epoch_packets,
            epoch_seconds=epoch_seconds, horizon=_number("horizon", self.horizon.text(), int, True),
            restart=self.restart.isChecked(), window=_number("window", self.window_w.text(), int, True),
            gamma=_number("gamma", self.gamma.text(), float, True), extra=dict(self.current.settings.extra))
        extras = {}
        for name, text in self._extra_texts.items():
            try:
                extra = parse_extra(text)
            except ValueError as exc:
                raise ValueError(f"options for {name}: {exc}") from None
            if extra:
                extras[name] = extra
        return RunConfig(self.names(), settings, extras, self.counting.counting())

    # ----- validation --------------------------------------------------------------------
    def _changed(self, *_) -> None:
        self._timer.start()

    def _extra_changed(self, text: str) -> None:
        self._extra_texts[self.extra_for.currentText()] = text
        self._changed()

    def validate(self) -> bool:
        """Parse and try every enabled algorithm's constructor; show the reasons."""
        self._timer.stop()
        self.errors = {}
        try:
            config = self.parse()
        except ValueError as exc:
            self.errors["settings"] = str(exc)
            config = None
        preview = {}
        if config is not None:
            if not config.names:
                self.errors["algorithms"] = "enable at least one algorithm"
            self.errors.update(config_errors(config))
            placeholder = placeholder_facts(config.settings)
            for name in config.names:
                if name not in self.errors and "settings" not in self.errors and catalogue.entry(name).private:
                    preview[name] = catalogue.preview(name, config.settings_for(name, placeholder), placeholder,
                                                      config.counting.counted())
        self.preview = preview
        self.pending = None if self.errors else config
        self.error.setText("\n".join(f"{n}: {e}" for n, e in self.errors.items()))
        self.error.setVisible(bool(self.errors))
        self.apply_button.setEnabled(not self.errors)
        self.validity.emit(not self.errors)
        return not self.errors

    def apply(self) -> bool:
        if not self.validate():
            return False
        self.current = self.pending
        self.applied.emit(self.pending)
        return True

    def refused(self, running: RunConfig, reason: str) -> None:
        """The window refused the Apply (``reason``, one line): ``running``, what the session on
        screen still runs, stays the applied configuration (Revert returns to it); the fields keep
        what was typed."""
        self.current = running
        self.error.setText(reason)
        self.error.setVisible(True)

    def show_running(self, running: Settings | None) -> None:
        """Say under the Epoch field what the session on screen does with epochs (``running``: the
        settings its lanes run with, None without a session or before its lanes are built)."""
        text = running_epochs_text(self.current.settings, running)
        if text != self.running_epochs.text():
            self.running_epochs.setText(text)
            self.running_epochs.setVisible(bool(text))

    def set_option(self, name: str, field: str, value) -> None:
        """Set one of ``name``'s own options (e.g. its k~ or window, ``config.PER_ALGORITHM``),
        shown on its "Options for" line; the other algorithms keep theirs."""
        extra = {**parse_extra(self._extra_texts.get(name, "")), field: value}
        self._extra_texts[name] = format_extra(extra)
        if self.extra_for.currentText() == name:
            self.extra.setText(self._extra_texts[name])
        else:
            self.extra_for.setCurrentText(name)  # shows its line
        self.validate()

    def set_value(self, field: str, value) -> None:
        """Put one tuned value in its field (the tuning panel's "apply to the live run")."""
        widget = {"epsilon": self.epsilon, "k_tilde": self.k_tilde, "window": self.window_w,
                  "delta": self.delta, "k": self.k}[field]
        widget.setText(f"{value:g}" if isinstance(value, float) else str(value))
        self.validate()
