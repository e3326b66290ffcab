"""The command line over core: `python -m core <command>` or `python -m cli`.

The only code that prints; core never imports it.
"""
