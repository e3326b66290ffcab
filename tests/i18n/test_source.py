"""No text a person reads is written in views/, ui/ or app.py outside the translation function (issue 39).

Each file is scanned (source_scan.py): a literal that reads as text and is not handed to _(), N_() or ngettext()
fails, with its line. What reads as text but is never shown to a person is listed in ALLOWED with the reason.
"""

from __future__ import annotations

import pytest
from source_scan import SCANNED, scan, scan_source

WARMUP_CLI = "the operator's terminal and the server log: English, as the command line is"  # ui/warmup.py
# path -> {literal: why it is not translated}. Symbols stay as they are (Q, K, V, d_k, softmax); a name of the lab
# or of a language is the same in every language.
ALLOWED: dict[str, dict[str, str]] = {
    "app.py": {"Attention Lab": "the lab's name"},
    "ui/language.py": {"Language · Idioma · 语言": "the picker's label in all three languages at once"},
    "ui/__init__.py": {},
    "ui/cache_view.py": {},
    "ui/cached.py": {},
    "ui/charts.py": {
        "Cividis": "a Plotly colour scale's name",
        "PuOr": "a Plotly colour scale's name",
        "{} %{y}<br>{} %{x}<br>{} %{text}<extra></extra>": "a Plotly hovertemplate's markup; its words are translated",
    },
    "ui/companion.py": {},
    "ui/export.py": {},
    "ui/figure_cache.py": {},
    "ui/follow.py": {},
    "ui/fragment.py": {},
    "ui/join.py": {
        "calc(100cqi / {})": "CSS",
    },
    "ui/layout.py": {},
    "ui/live_class.py": {},
    "ui/mask_charts.py": {},
    "ui/models.py": {},
    "ui/params.py": {
        "{} cannot take {}": "a ValueError ui.follow catches, never shown",
        "a text of {} characters is longer than a link carries": "a ValueError ui.follow catches, never shown",
        "not one of the options: {}": "a ValueError ui.follow catches, never shown",
    },
    "ui/predict.py": {},
    "ui/projector.py": {
        # issue 39 (a phone, Chinese fonts): the page's CSS
        (
            '"Source Sans", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC", '
            '"Hiragino Sans GB", "Microsoft YaHei", sans-serif'
        ): "CSS: the page's and the charts' font stack",
    },
    "ui/rope_figure.py": {"{}<br>(%{x:.4f}, %{y:.4f})<extra></extra>": "Plotly hovertemplate markup"},
    "ui/startup.py": {},
    "ui/suggestion_view.py": {"end of document": "a suggestion's stop_reason code (core), not shown"},
    "ui/teacher.py": {
        "{} stayed locked by other attempts for over {} s": "AttemptsUnavailable: logged for the operator, not shown",
        "{} cannot be read or written ({}); check {}": "AttemptsUnavailable: logged for the operator, not shown",
    },
    "ui/text.py": {},
    "ui/training_view.py": {
        "top left": "a Plotly annotation position",
        "top right": "a Plotly annotation position",
        "bottom left": "a Plotly annotation position",
    },
    "ui/warmup.py": {
        "warm-up: {} pages in {} s, {} errors": WARMUP_CLI,
        "no answer within {} s": WARMUP_CLI,
        "the page raised ": WARMUP_CLI,
        "the server at {} could not be reached ({}: {})": WARMUP_CLI,
        "python -m ui.warmup": WARMUP_CLI,
        "Start a running lab's warm-up.": WARMUP_CLI,
        "the lab (default http://localhost:8501)": WARMUP_CLI,
        "error: --url must be this machine's lab (http://localhost:PORT or http://127.0.0.1:PORT)": WARMUP_CLI,
        "error: the lab at {} did not answer within {} s": WARMUP_CLI,
        "The lab answers at {}; it is computing its pages' default views (see its log).": WARMUP_CLI,
    },
    "views/anatomy.py": {"def f(x):\n    return x  # é": "sample Python code the model reads"},
    "views/autocomplete.py": {
        "class Stack:\n    def __init__(self": "the default prompt: Python code the model completes"
    },
    "views/checkpoint.py": {},
    "views/embeddings.py": {"def add(a, b):": "sample Python code the model reads"},
    "views/home.py": {
        "Attention Lab": "the lab's name",
        r"$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V$": "LaTeX",
    },
    "views/inside/flow_figure.py": {},
    "views/inside/page.py": {"def __init__(self": "sample Python code the text box starts with"},
    "views/inspector/compare_view.py": {},
    "views/inspector/grid_figure.py": {"{} domain": "a Plotly axis reference ('x2 domain'), not shown"},
    "views/inspector/page.py": {
        "def add(a, b): return a + b": "sample Python code the text box starts with",
        "$\\mathrm{out}_t = \\sum_s w_{t,s}\\, v_s$": "a LaTeX formula, the same in every language",
    },
    "views/masks.py": {},
    "views/monitoring.py": {},
    "views/read_row.py": {},
    "views/release/cost_view.py": {},
    "views/release/page.py": {},
    "views/release/registry_view.py": {},
    "views/release/release_actions.py": {
        "version {}": "names the bundle inside core's English error, where the server's path was",
    },
    "views/release/rubric.py": {},
    "views/release/tradeoff_view.py": {
        "the trade-off needs exactly one chosen threshold, got {}": "a ValueError of a bug, never a page's message",
    },
    "views/rope.py": {
        "def add(a, b): return a + b": "sample Python code the model reads",
        "top center": "a Plotly textposition",
        "y domain": "a Plotly axis reference",
    },
    "views/score_geometry.py": {},
    "views/temperature.py": {},
    "views/training.py": {
        "the Python standard library": "the corpus's name in the run's stored name and record label, kept in English",
        ", from {}": "part of the queued job's name (job.json), never shown",
        "{} on {}{}, {} steps": "the queued job's name (job.json), never shown",
    },
}


@pytest.mark.parametrize("path", SCANNED)
def test_every_literal_a_person_reads_goes_through_the_catalogs(path):
    allowed = ALLOWED.get(path, {})
    found = scan(path)
    left = [f for f in found if f.problem != "not translated" or f.text not in allowed]
    assert not left, "\n".join(f"{f.path}:{f.line}: {f.problem}: {f.text[:90]!r}" for f in left)
    stale = set(allowed) - {f.text for f in found}
    assert not stale, f"ALLOWED lists what {path} no longer holds (or the scan no longer reports): {sorted(stale)}"


def test_the_scan_finds_what_it_must_and_skips_what_it_may():
    source = '''
"""A docstring."""
import streamlit as st
from core.i18n import _, N_
KEY = "live_class_code"
OPTIONS = [N_("All at once"), N_("Step by step")]
st.title(_("Read one row"))
st.caption("Weights sum to one")
st.button("Stop", key="train_stop", type="primary")
st.markdown(f"loss {loss:.3f} after {n} steps")
st.write(_(f"not {extractable}"))
_LOGGER.info("Warm-up finished")
'''
    found = [(f.text, f.problem) for f in scan_source(source, "x.py")]
    assert found == [
        ("Weights sum to one", "not translated"),
        ("Stop", "not translated"),
        ("loss {} after {} steps", "not translated"),
        ("f'not {extractable}'", "not extractable"),
    ]
