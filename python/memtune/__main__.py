"""python3 -m memtune ARGS: the memtune command line, run in this interpreter."""

import sys

from . import _core


def main() -> int:
    sys.stdout.flush()
    code, _, _, _ = _core.run_cli(sys.argv[1:], None, False)
    return code


if __name__ == "__main__":
    sys.exit(main())
