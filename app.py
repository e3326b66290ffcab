"""Attention Lab: the entry point. Navigation and the shared sidebar; every lesson lives in views/."""

import streamlit as st

from core.i18n import _
from ui import export, follow, fragment, language, live_class, models, projector, startup, warmup

startup.start()  # first: the server process's own set-up, once (torch threads, the heap frozen; ui/startup.py)
language.apply()  # before any text: the link's, the picker's, the class's or the browser's

# Before any widget: projector mode (the toggle, or a first visit's link) starts with the sidebar collapsed.
st.set_page_config(page_title="Attention Lab", layout="wide", initial_sidebar_state=projector.sidebar_state())

PAGES = {
    _("Attention"): [
        st.Page("views/home.py", title=_("Start here"), default=True),
        st.Page("views/score_geometry.py", title=_("Score geometry")),
        st.Page("views/masks.py", title=_("Masks")),
        st.Page("views/read_row.py", title=_("Read one row")),
        st.Page("views/temperature.py", title=_("Temperature")),
    ],
    _("Transformer"): [
        st.Page("views/inside/page.py", title=_("Inside the model"), url_path="inside"),
        st.Page("views/anatomy.py", title=_("Tokenizer and architecture")),
        st.Page("views/embeddings.py", title=_("Embeddings and projections")),
        st.Page("views/rope.py", title=_("RoPE")),
        st.Page("views/training.py", title=_("Training")),
        st.Page("views/autocomplete.py", title=_("Autocomplete")),
        st.Page("views/inspector/page.py", title=_("Attention inspector"), url_path="inspector"),
    ],
    _("Check"): [
        st.Page("views/checkpoint.py", title=_("Checkpoint")),
    ],
    _("Release"): [
        st.Page("views/release/page.py", title=_("Release"), url_path="release"),
        st.Page("views/monitoring.py", title=_("Monitoring")),
    ],
}

page = st.navigation(PAGES, expanded=True)  # every page listed: no "View more" fold
fragment.remember_page(page)  # the page a polling fragment's tick belongs to (ui/fragment.py, polled)
warmup.start()  # the first run of a server computes every lab page's default view in the background (ui/warmup.py)
language.picker()
models.sidebar()
live_class.sidebar()  # a class session: join with its code, or (teacher) open one
projector.toggle()
projector.style()
export.begin()
export.view_button(page.title)
models.banner()
follow.sync(page.url_path)  # a learner following the teacher is brought to the teacher's page and widgets
page.run()
startup.settle(page.url_path)  # after a page's first run here: its imports, model and caches out of the GC's walk
