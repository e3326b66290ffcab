"""The lessons wing: the pure computations behind the attention lesson pages.

scores (temperature, the √d scaling experiment, score geometry, the worked example), masks, one_row
(the release checkpoint), rope (the RoPE page's experiments). Imports the kernel and the model wing.
"""
