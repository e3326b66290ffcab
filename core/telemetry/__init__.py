"""Telemetry: what the served model did, by exact model version: recorded, replayed as synthetic traffic, summed for
the Monitoring page, and costed.
"""
