"""``python -m lib.rating``: A run's answers as a Label Studio rating project (:func:`lib.rating.labelstudio.main`)."""

import sys

from lib.rating.labelstudio import main

sys.exit(main())
