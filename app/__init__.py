"""dptop: differentially private top talkers.

The installed package maps the repository's folders: ``app/`` is ``dptop`` itself (the headless
monitor and its two views, the CLI and the GUI), ``engine/`` is ``dptop.engine``, ``capture/`` is
``dptop.capture`` and ``resources/`` is ``dptop.resources``. ARCHITECTURE.md has the map.
"""


def __getattr__(name: str):
    """``__version__``, read from the installed metadata when asked (not at every start of the command)."""
    if name != "__version__":
        raise AttributeError(f"module 'dptop' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dptop")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
