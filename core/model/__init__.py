"""The model wing: the decoder-only transformer from basic layers and everything that makes or moves one.

tokenizer, rope, gpt (ModelConfig, GPT), kv_cache, sampling, introspect (a text through the model's own
modules), corpus, training, leak (the causality probe), runs and jobs (a training run in the app),
bundle (the versioned files). Imports the kernel (core.attention, core.agreement) and nothing above it.
"""
