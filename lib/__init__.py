"""VQA Lab."""

import os

# Before anything imports torch: libgomp, torch's OpenMP on Linux, reads GOMP_SPINCOUNT when it
# loads. Its threads spin 300,000 turns at every barrier before they sleep. Where other work shares
# the cores, a descheduled thread then holds every parallel region (a two-thread training several
# times slower beside one busy process) and a short spin gives most of that time back; where the
# process has the cores alone, the long spin is what keeps a thread awake between the small steps of
# generation (stage 06 at batch 1: benchmarks/overhead.py). So each process
# chooses when it starts (:func:`openmp_spin`); a run that finds the cores shared only later keeps
# the long spin. Scheduling only: the numbers are the same. A user's value wins; lib's own choice is
# marked (``SPIN_MARK``) so that a child process chooses anew.
SHORT_SPIN = "1000"  # turns (benchmarks/train.py, benchmarks/spin.py, benchmarks/overhead.py)
SPIN_MARK = "VQALAB_GOMP_SPINCOUNT"


def others_running(reads: int = 5, gap_s: float = 0.004) -> int | None:
    """Tasks the kernel counts as runnable besides this process (the fourth field of
    ``/proc/loadavg``), the median of a few reads ``gap_s`` apart; None where it cannot be read."""
    import statistics
    import time

    counts = []
    for n in range(reads):
        try:
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
        if n + 1 < reads:
            time.sleep(gap_s)
    return int(statistics.median(counts))


def openmp_spin(others: int | None) -> str | None:
    """``GOMP_SPINCOUNT`` for a process starting beside ``others`` runnable tasks: the short spin where
    any shares the cores (or the count is unknown), None (libgomp's own) where it has them alone."""
    return None if others == 0 else SHORT_SPIN


def users_spin(env=os.environ) -> str | None:
    """The ``GOMP_SPINCOUNT`` the user set in ``env``; None where unset or lib's own (marked)
    choice."""
    given = env.get("GOMP_SPINCOUNT")
    return None if given is None or given == env.get(SPIN_MARK) else given


def set_spin(spin: str, env=os.environ) -> None:
    """Set ``GOMP_SPINCOUNT=spin`` in ``env`` as a user sets it (unmarked: every child keeps it)."""
    env.pop(SPIN_MARK, None)
    env["GOMP_SPINCOUNT"] = spin


def _choose_spin() -> None:
    if users_spin() is not None:
        return
    spin = openmp_spin(others_running())
    for key in ("GOMP_SPINCOUNT", SPIN_MARK):
        if spin is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = spin


_choose_spin()
