"""Data bundled with dptop, located through ``importlib.resources`` (provenance in SOURCES.md)."""
from importlib.resources import files
from pathlib import Path

# A wheel installs package data as plain files, so the resource is a real path the parser can map.
DEMO_CAPTURE = Path(str(files(__name__).joinpath("demo.pcap.gz")))
"""The capture ``dptop demo`` replays, composed by ``build_demo`` from public attack captures."""
