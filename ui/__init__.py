"""Streamlit-only helpers: URL-synced widgets (params), figure builders (charts), chart companions."""
