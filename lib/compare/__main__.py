"""``python -m lib.compare``: Compare two runs item by item (:func:`lib.compare.runs.main`)."""

import sys

from lib.compare.runs import main

sys.exit(main())
