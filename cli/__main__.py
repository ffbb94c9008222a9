"""`python -m cli ARGS`: the `farm` command without its entry point (a checkout, bench scripts)."""

import sys

from cli import main

sys.exit(main())
