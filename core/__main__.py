"""`python -m core <command>`: see core/cli.py."""
import sys

from core.cli import main

if __name__ == "__main__":
    sys.exit(main())
