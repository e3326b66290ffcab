"""The baselines: the rule and n-gram fallbacks, what they share, and their bundles."""
