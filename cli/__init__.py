"""The command line over core: `python -m core <command>` (core/__main__.py) or `python -m cli`.

main (train, generate, and the registry of commands), release (evaluate, baseline, release ...).
The only code that prints; core never imports it.
"""
