"""The release wing: serving a model and deciding whether it may be served.

    autocomplete     the prompt, the word suggestion, a baseline's offer; re-exports the pieces below
      forward, candidates, completion, cache_timing, parity
    baselines        the rule and n-gram fallbacks; re-exports predictor, counts, ngram, rule, baseline_bundle
    evaluation       held-out evaluation of any predictor; eval_report, transformer_predictor, slices,
                     typing_sim, latency, comparison
    gate             the release rubric: rubric (policy, records, rubric.json), checks (causality, cache,
                     no-peek, canary)
    registry         promote and rollback; serving (what is served, the checks a version passes),
                     leftovers, registry_log, registry_status

Imports the kernel and the model wing, never the lessons.
"""
