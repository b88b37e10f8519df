"""``python -m lib.pipeline``: Run the stage notebooks under a profile (:func:`lib.pipeline.execute.main`)."""

import sys

from lib.pipeline.execute import main

sys.exit(main())
