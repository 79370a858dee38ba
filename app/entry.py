"""The ``dptop`` command (and ``python -m dptop``): the command line (dptop.cli) loads numba and
numpy, about half a second; a stop signal meanwhile (SIGINT, SIGTERM, SIGHUP: dptop.interrupts) ends
the command in one line, not a traceback. The process's start and end are dptop.lifetime's (the
collector off while it starts, no teardown after a replay or a capture)."""
from dptop import interrupts, lifetime


def main() -> int:
    interrupts.stop_at_start()
    lifetime.begin()
    try:
        with interrupts.Deferred():  # a signal while numpy and numba load ends the start once they have
            from dptop.cli import main as command
    except KeyboardInterrupt as exc:
        status = interrupts.exit_status(exc)
        lifetime.end_without_teardown()  # nothing was opened yet: the half-loaded modules need no teardown
        lifetime.returned(status)
        return status
    status = command()
    lifetime.returned(status)
    return status
