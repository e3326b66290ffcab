"""Held-out evaluation of any predictor: the simulated typist, slices and their intervals, latency, the decision
utility, the threshold's tuning, and a bundle against its baselines.
"""
