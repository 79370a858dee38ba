"""The ``dptop`` command (and ``python -m dptop``): the command line (dptop.cli) loads numba and
numpy, about half a second; a Ctrl-C meanwhile ends the command in one line, not a traceback."""
import sys


def main() -> int:
    try:
        from dptop.cli import main as command
    except KeyboardInterrupt:
        print("dptop: interrupted", file=sys.stderr)
        return 130
    return command()
