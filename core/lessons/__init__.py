"""The lessons wing: the pure computations behind the attention lesson pages (scaling and temperature, masks, one
row by hand, RoPE, the worked example, the tiny-batch overfit, the KV cache). Imports the kernel and the model wing.
"""
