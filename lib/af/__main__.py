"""``python -m lib.af --profile P [--set k=v]`` or ``--params FILE --out DIR``: stage 03 from the command line."""

import sys

from lib import cli
from lib.af.engine import AFConfig
from lib.af.stage import run

if __name__ == "__main__":
    sys.exit(cli.main("python -m lib.af", AFConfig, run, description="Stage 03: adversarial filtering."))
