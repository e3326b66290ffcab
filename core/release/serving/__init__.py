"""Serving a suggestion: the prompt, the suggestion policy, the predictor interface, the next characters and a
streamed completion (the release wing's first unit)."""
