"""What the window's labels say and whether they can be read (offscreen): the chart's rank labels
never overlap however short its bars are."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

from itertools import combinations

import pytest
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication

from dptop.gui.models import Row
from dptop.gui.panel import CHART_ROWS, BarChart


def drawn_labels(chart: BarChart) -> list:
    """(rectangle, text) of every label the chart's rank axis draws now."""
    axis = chart.getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in specs[2]]


@pytest.mark.parametrize("height", [130, 180, 260, 600])
def test_rank_labels_never_overlap(qtbot, height):
    """Twelve bars (the exact panel's full chart) in a chart from its minimum height up: no two
    rank labels intersect; the first rank is always labelled, and a tall chart labels every rank."""
    QApplication.instance() or QApplication([])
    chart = BarChart(private=False)
    qtbot.addWidget(chart)
    chart.resize(320, height)
    chart.show()
    qtbot.waitExposed(chart)
    chart.show_rows([Row(i + 1, f"10.0.0.{i}", 1000.0 - 50 * i, 990 - 50 * i) for i in range(CHART_ROWS)], None)
    QApplication.processEvents()
    labels = drawn_labels(chart)
    texts = [t for _, t in labels]
    assert "#1" in texts, texts
    for (a, ta), (b, tb) in combinations(labels, 2):
        assert not a.intersects(b), (height, ta, a, tb, b)
    if height >= 600:
        assert texts == [f"#{i}" for i in range(1, CHART_ROWS + 1)]
