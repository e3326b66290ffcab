"""The model wing: the decoder-only transformer built from basic layers, and what makes, reads or moves one
(the tokenizer, the corpus, training, the causality probe, the look inside a model, bundles).

Imports the kernel (the attention kernel, the agreement rule) and nothing above it.
"""
