"""Streamlit-only helpers: URL-synced widgets (params), figure builders (charts), chart companions.

Importing this package runs nothing: the server's own set-up (torch's threads, the heap frozen out of the garbage
collector's walk) is ui/startup.py's `start()`, which app.py calls first.
"""
