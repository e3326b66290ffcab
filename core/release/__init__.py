"""The release wing: serving a model and deciding whether it may be served.

autocomplete (prompts, candidates, completions, suggestions, parity, cache timing), baselines (rule and
n-gram), evaluation, gate (the release rubric), registry (versions, current, rollback, what is served).
Imports the kernel and the model wing, never the lessons.
"""
