"""A label that never clips: a fixed number of lines, each elided to the label's width with "…"
(or, in wrap mode, plain text wrapped and its last line elided); the tooltip holds the full text.

Lines are lists of ``(text, bold)`` segments, rendered as rich text after escaping, so a line can
carry bold numbers and still be cut at the right pixel.
"""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QTextLayout
from PySide6.QtWidgets import QLabel, QSizePolicy

ELLIPSIS = "…"
MARGIN = 4  # px kept free at the right edge (rich-text rendering rounds differently from the metrics)


def _html(text: str, bold: bool) -> str:
    out = html.escape(text, quote=False).replace(" ", "&nbsp;")
    return f"<b>{out}</b>" if bold else out


def elide_segments(segments, width: int, font: QFont) -> tuple[str, bool]:
    """(rich text of ``segments`` cut to ``width`` px, whether anything was cut)."""
    bold_font = QFont(font)
    bold_font.setBold(True)
    metrics = {False: QFontMetrics(font), True: QFontMetrics(bold_font)}
    out, left = [], width
    for text, bold in segments:
        m = metrics[bool(bold)]
        advance = m.horizontalAdvance(text)
        if advance <= left:
            out.append(_html(text, bold))
            left -= advance
            continue
        cut = m.elidedText(text, Qt.TextElideMode.ElideRight, max(0, left))
        out.append(_html(cut or ELLIPSIS, bold) if left > 0 else "")
        return "".join(out), True
    return "".join(out), False


def wrap_text(text: str, width: int, font: QFont, max_lines: int) -> tuple[list[str], bool]:
    """``text`` (paragraphs split at newlines) wrapped to ``width`` px in at most ``max_lines``
    lines, the last one elided when more would follow; (lines, whether anything was cut)."""
    lines: list[str] = []
    paragraphs = text.split("\n")
    for p, paragraph in enumerate(paragraphs):
        layout = QTextLayout(paragraph, font)
        layout.beginLayout()
        starts = []
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            starts.append((line.textStart(), line.textLength()))
        layout.endLayout()
        for i, (start, length) in enumerate(starts or [(0, 0)]):
            if len(lines) == max_lines - 1 and (i < len(starts) - 1 or p < len(paragraphs) - 1):
                rest = paragraph[start:]
                more = p < len(paragraphs) - 1
                cut = QFontMetrics(font).elidedText(rest + (ELLIPSIS if more else ""),
                                                    Qt.TextElideMode.ElideRight, width)
                lines.append(cut)
                return lines, True
            lines.append(paragraph[start:start + length].rstrip())
    return lines, False


class ElidedLabel(QLabel):
    """``set_lines([[(text, bold), ...], ...])`` or ``set_plain(text)``; ``full_text()`` is what
    the label says before eliding (also its tooltip, followed by ``extra_tip``)."""

    def __init__(self, lines: int, wrap: bool = False, parent=None):
        super().__init__(parent)
        self.max_lines, self.wrap = lines, wrap
        self.extra_tip = ""
        self.elided = False
        self._lines: list[list[tuple[str, bool]]] = []
        self._width = -1
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(False)
        # text changes must not resize the panel (a re-layout would resize every chart)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(1)
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + 2)

    def set_lines(self, lines, extra_tip: str = "") -> None:
        lines = [[(str(t), bool(b)) for t, b in line] for line in lines]
        if lines == self._lines and extra_tip == self.extra_tip:
            return
        self._lines, self.extra_tip = lines, extra_tip
        self._width = -1
        self._render()

    def set_plain(self, text: str, extra_tip: str = "") -> None:
        self.set_lines([[(line, False)] for line in text.split("\n")] if text else [], extra_tip)

    def full_text(self) -> str:
        return "\n".join("".join(t for t, _ in line) for line in self._lines)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._render()

    def _render(self) -> None:
        width = max(1, self.contentsRect().width() - MARGIN)
        if width == self._width:
            return
        self._width = width
        if self.wrap:
            lines, cut = wrap_text(self.full_text(), width, self.font(), self.max_lines)
            rich = [_html(line, False) for line in lines]
        else:
            rendered = [elide_segments(line, width, self.font()) for line in self._lines[:self.max_lines]]
            rich = [r for r, _ in rendered]
            cut = any(c for _, c in rendered) or len(self._lines) > self.max_lines
        self.elided = cut
        text = "<br>".join(rich)
        if text != self.text():
            self.setText(text)
        tip = "\n\n".join(t for t in (self.full_text(), self.extra_tip) if t)
        if tip != self.toolTip():
            self.setToolTip(tip)
