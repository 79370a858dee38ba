"""Shared fixtures: paths to the real captures (tests/data in the repo, ../shared/pcaps beside it)."""
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parent / "data"
SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"
SHARED_PCAPS = SHARED_DIR / "pcaps"
DNS_CAPTURE = DATA_DIR / "amp.dns.RRSIG.fragmented.pcap"
"""A real DNS amplification capture (4412 packets over 29.7 s, one source sends 45%): the small
capture the replay, CLI and window tests read (provenance in tests/data/SOURCES.md)."""


@pytest.fixture
def data_dir() -> Path:
    """tests/data: captures copied into the repo (provenance in tests/data/SOURCES.md)."""
    return DATA_DIR


@pytest.fixture
def shared_pcaps() -> Path:
    """../shared/pcaps (main/, robust/, STATS.txt); the test is skipped when it is absent."""
    if not SHARED_PCAPS.is_dir():
        pytest.skip(f"needs the larger collection of real captures (a pcaps/ folder at {SHARED_PCAPS}), "
                    "which is not part of the repository")
    return SHARED_PCAPS


LONGEST_FIRST = ("test_capture_linear.py", "test_cluster_trust.py", "test_feed_server.py", "test_capture_linear_gzip.py",
                 "test_cli_robustness.py", "test_parameter_table.py", "test_monitor_audit.py", "test_top.py",
                 "test_gui_layout.py", "test_cluster_live.py", "test_cluster_partial.py", "test_gui_window.py",
                 "test_capture_lines.py", "test_product_matrix.py", "test_audit.py", "test_keykinds.py",
                 "test_gui_sessions.py", "test_capture_live.py")
"""The test files that take longest (wall time, most of it waiting on live links, paced clocks and
subprocesses), handed out first: ``make test`` gives each worker whole files, and one of these
started last would keep a worker busy after the others are done."""


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
