"""Streamlit-only helpers: URL-synced widgets, figure builders, chart companions, cached resources.

Importing this package runs nothing: the server's own set-up is the startup module's, which app.py calls first.
"""
