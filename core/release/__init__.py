"""The release wing: serving a model and deciding whether it may be served, in five units: serving (the
suggestion as served), evaluation (held-out, any predictor), gate (the release rubric), registry (promote,
rollback, what is served and why) and baselines (the rule and n-gram fallbacks).

Imports the kernel and the model wing, never the lessons.
"""
