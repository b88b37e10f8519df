"""VQA Lab."""

import os

# Before anything imports torch: libgomp, torch's OpenMP on Linux, reads it when it loads. Its threads
# spin 300,000 turns at every barrier before they sleep, so on cores another process also uses a
# descheduled thread holds every parallel region (two-thread training several times slower beside
# one busy process); a short spin gives most of that time back, at a small cost on idle cores
# (benchmarks/train.py measures both over 150 steps, benchmarks/spin.py over whole demo trainings
# alone). Kept for every run: load that arrives after a run started would find a long spin chosen
# at its start. Scheduling only: the numbers are the same. A user's value wins.
SHORT_SPIN = "1000"  # turns (benchmarks/spin.py, benchmarks/train.py: against libgomp's)
os.environ.setdefault("GOMP_SPINCOUNT", SHORT_SPIN)
