"""Telemetry: what the served model did, by exact model version: recorded (store, record), replayed (traffic),
summed (monitor)."""
