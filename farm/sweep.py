"""Run a sweep: `python farm/sweep.py ARGS`, the same as `farm sweep ARGS` (cli/sweep.py).

This file is the script Ray's tools run: `ray submit cluster.yaml farm/sweep.py -- ARGS` copies it
alone to the head node and runs `python ~/sweep.py ARGS`; `ray job submit --working-dir . --
python farm/sweep.py ARGS` runs it in an uploaded copy of the checkout. Either way it joins the
Ray cluster running there (farm/cluster.py). It is a script, not a module of `farm`: nothing
imports it, and it may import the command line above `farm` (tests/test_layering.py knows).
"""

import os
import sys

if __name__ == "__main__":
    # `ray submit` copies this file alone to the head node and runs `python ~/sweep.py`: import the
    # installed package, and never this folder's modules as top-level ones (sys.path[0] is this
    # folder when a file is run as a script). An uploaded working directory (ray job submit
    # --working-dir .) is importable as it is.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    if os.path.isfile(os.path.join(os.getcwd(), "farm", "__init__.py")):
        sys.path.insert(0, os.getcwd())


def main(argv: list[str] | None = None) -> int:
    from cli import main as cli_main

    return cli_main(["sweep", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
