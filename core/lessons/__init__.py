"""The lessons wing: the pure computations behind the attention lesson pages.

scores (temperature, the √d scaling experiment, score geometry, the worked example), example_run (the worked
example's source beside what it prints), masks, one_row (one attention row by tensor and by hand, compared in
float64), rope (the RoPE page's experiments), overfit (the tiny-batch overfit), kv_cache (the KV-cache lesson:
parity trace and timing). Imports the kernel and the model wing.
"""
