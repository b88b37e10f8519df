"""``python -m lib.agreement``: Hold every scorer of a task against human labels (:func:`lib.agreement.scorers.main`)."""

import sys

from lib.agreement.scorers import main

sys.exit(main())
