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
