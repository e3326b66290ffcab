"""`python -m cli <command>`: the same commands as `python -m core`."""

import sys

from cli.main import main

if __name__ == "__main__":
    sys.exit(main())
