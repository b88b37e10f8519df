"""Why two numbers differ: two runs paired item by item (:mod:`lib.compare.explain`) and its command
line, ``python -m lib.compare`` (:mod:`lib.compare.runs`)."""
