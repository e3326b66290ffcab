"""Attention Lab: the entry point. Navigation and the shared sidebar; every lesson lives in pages/."""
import streamlit as st

from ui import models

st.set_page_config(page_title="Attention Lab", layout="wide")

PAGES = {
    "Attention": [
        st.Page("pages/home.py", title="Start here", default=True),
        st.Page("pages/score_geometry.py", title="Score geometry"),
        st.Page("pages/masks.py", title="Masks"),
        st.Page("pages/read_row.py", title="Read one row"),
        st.Page("pages/temperature.py", title="Temperature"),
    ],
    "Transformer": [
        st.Page("pages/embeddings.py", title="Embeddings and projections"),
        st.Page("pages/rope.py", title="RoPE"),
        st.Page("pages/training.py", title="Training"),
        st.Page("pages/autocomplete.py", title="Autocomplete"),
        st.Page("pages/inspector.py", title="Attention inspector"),
    ],
    "Release": [
        st.Page("pages/release.py", title="Release"),
    ],
}

page = st.navigation(PAGES)
models.sidebar()
models.banner()
page.run()
