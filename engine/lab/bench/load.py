"""The load average printed beside every ``dptop bench`` row: the machine may be shared, and a
figure without its load does not reproduce."""
import os


def load_average() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)
