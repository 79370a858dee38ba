"""dptop: differentially private top talkers.

The installed package maps the repository's folders: ``app/`` is ``dptop`` itself (the headless
monitor and its two views, the CLI and the GUI), ``engine/`` is ``dptop.engine``, ``capture/`` is
``dptop.capture`` and ``resources/`` is ``dptop.resources``. ARCHITECTURE.md has the map.
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dptop")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
