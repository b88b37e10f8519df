"""``python -m lib.export``: Hand a dataset to another evaluation harness (:func:`lib.export.harnesses.main`)."""

import sys

from lib.export.harnesses import main

sys.exit(main())
