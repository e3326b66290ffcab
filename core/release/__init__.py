"""The release wing: serving a model and deciding whether it may be served, in five units.

    serving      the suggestion as served: the prompt, the policy, the predictor interface (the transformer's
                 included), the next characters, a streamed completion
    evaluation   held-out evaluation of any predictor: the typist, slices, intervals, latency, the decision
                 utility, the threshold's tuning, a bundle against its baselines
    gate         the release rubric and its checks (causality, the KV cache, no peeking, the baselines)
    registry     promote and rollback, the log, what is served and why, an interrupted promotion's leftovers
    baselines    the rule and n-gram fallbacks and their bundles

Imports the kernel and the model wing, never the lessons.
"""
