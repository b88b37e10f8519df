"""VQA Lab."""

import os
import time

# Before anything imports torch: libgomp, torch's OpenMP on Linux, reads GOMP_SPINCOUNT when it loads.
# Its threads spin 300,000 turns at every barrier before they sleep, so on cores another process also
# uses, a descheduled thread holds every parallel region (two-thread training several times slower
# beside one busy process); a short spin gives most of that time back, but alone on its cores it costs
# a whole training about a quarter of its time. So each process chooses when it starts: the short
# spin only while something else runs (benchmarks/train.py and benchmarks/spin.py measure both).
# Scheduling only: the numbers are the same either way. A value the user set is kept.
SHORT_SPIN = "1000"  # turns, against libgomp's 300,000
_CHOSEN = (
    "VQALAB_GOMP_SPINCOUNT"  # the value this choice set, so that a child process chooses again
)


def others_running(samples: int = 3, pause: float = 0.005) -> int:
    """How many threads besides this one the machine runs now: the fewest of up to ``samples``
    readings of /proc/loadavg's runnable count (the reader is one of them), stopping at one that
    shows none, so that a passing blip does not count; 0 where the file is missing."""
    fewest = None
    for i in range(samples):
        try:
            with open("/proc/loadavg") as f:
                now = int(f.read().split()[3].split("/")[0]) - 1
        except (OSError, IndexError, ValueError):
            return 0
        fewest = now if fewest is None else min(fewest, now)
        if fewest <= 0:
            return 0
        if i + 1 < samples:
            time.sleep(pause)
    return fewest


def choose_spin(environ=os.environ, others: int | None = None) -> str | None:
    """Set ``GOMP_SPINCOUNT`` in ``environ`` for this process and its children: ``SHORT_SPIN`` while
    other work runs (``others``: :func:`others_running`), else libgomp's own (unset); a value the
    user set wins. Returns the value in force (None: libgomp's own)."""
    given = environ.get("GOMP_SPINCOUNT")
    if given is not None and given != environ.get(_CHOSEN):
        return given
    if (others_running() if others is None else others) > 0:
        environ["GOMP_SPINCOUNT"] = environ[_CHOSEN] = SHORT_SPIN
    else:
        environ.pop("GOMP_SPINCOUNT", None)
        environ.pop(_CHOSEN, None)
    return environ.get("GOMP_SPINCOUNT")


def unchosen(environ=os.environ) -> dict:
    """A copy of ``environ`` without the spin this choice set (a value the user set stays): the
    environment of a child that is to run as if lib had never been imported, or under a spin given
    explicitly."""
    env = dict(environ)
    if env.get("GOMP_SPINCOUNT") == env.pop(_CHOSEN, None):
        env.pop("GOMP_SPINCOUNT", None)
    return env


SPIN = choose_spin()
