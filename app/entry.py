"""The ``dptop`` command (and ``python -m dptop``): the command line (dptop.cli) loads numba and
numpy, about half a second; a Ctrl-C meanwhile ends the command in one line, not a traceback. The
process's start and end are dptop.lifetime's (the collector off while it starts, no teardown after
a replay or a capture)."""
import sys

from dptop import lifetime


def main() -> int:
    lifetime.begin()
    try:
        from dptop.cli import main as command
    except KeyboardInterrupt:
        print("dptop: interrupted", file=sys.stderr)
        return 130
    status = command()
    lifetime.returned(status)
    return status
