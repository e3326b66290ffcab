"""Streamlit-only helpers: URL-synced widgets (params), figure builders (charts), chart companions.

Importing this package also freezes the heap once per server process. Streamlit runs a full garbage
collection after every script run (`runner.postScriptGC`, on by default), and a full collection walks every
tracked object: with torch, pandas, plotly and Streamlit loaded that is about 270 000 objects and 150-250 ms
of held GIL after each rerun, longer than most pages take to run (bench/bench_pages.py). These objects live
as long as the server, so `gc.freeze()` moves them to the permanent generation, which collections skip;
objects created later (figures, results, caches) are collected as before.
"""

import gc

import pandas  # noqa: F401  (imported here so that their long-lived objects are frozen below)
import plotly.graph_objects  # noqa: F401
import streamlit  # noqa: F401
import torch  # noqa: F401

gc.freeze()
