"""The model registry: promote, rollback, its log, what is served and why, and what an interrupted promotion
leaves.
"""
