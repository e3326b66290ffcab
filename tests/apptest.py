"""Helpers for page tests with streamlit.testing.v1.AppTest."""

import base64
import json
import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from ui.text import WORD_JOINER

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
# Every page of app.py, by url path, in the sidebar's order.
PAGES = [
    "home",
    "score_geometry",
    "masks",
    "read_row",
    "temperature",
    "inside",
    "anatomy",
    "embeddings",
    "rope",
    "training",
    "autocomplete",
    "inspector",
    "checkpoint",
    "release",
    "monitoring",
]


def page_file(stem: str) -> str:
    """The script of the page at url path `stem`: views/<stem>.py, or a page package's views/<stem>/page.py."""
    package = f"views/{stem}/page.py"
    return package if (ROOT / package).is_file() else f"views/{stem}.py"


def open_page(
    page: str, query: dict[str, str] | None = None, timeout: float = 60, *, bundle: tuple[str, str | Path] | None = None
) -> AppTest:
    """Run app.py, switch to views/<page>.py (with optional query parameters) and return the AppTest.

    `bundle` = (label, path): that bundle is added to this session and selected in the sidebar first.
    """
    at = AppTest.from_file(APP, default_timeout=timeout)
    if bundle is not None:
        label, path = bundle
        at.session_state["lab_session_bundles"] = [(label, str(path))]
        at.session_state["lab_bundle"] = label
    at.run()
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.switch_page(page_file(page)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figures(at: AppTest) -> list[dict]:
    """The Plotly figures the page rendered, as JSON dicts."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def figure(at: AppTest, title_start: str) -> dict:
    """The one figure whose title starts with `title_start` (fails, listing the titles, unless exactly one does)."""
    found = [f for f in figures(at) if f["layout"]["title"]["text"].startswith(title_start)]
    assert len(found) == 1, [f["layout"]["title"]["text"] for f in figures(at)]
    return found[0]


def picture_figures(at: AppTest) -> list[dict]:
    """The Plotly figures inside the page's picture container (ui.layout.picture), as JSON dicts."""
    blocks, todo = [], list(at.main.children.values())  # the container may sit in a column
    while todo:
        node = todo.pop()
        if getattr(node.proto, "id", "").endswith("-picture"):
            blocks.append(node)
        todo += list(getattr(node, "children", {}).values())
    assert len(blocks) == 1, f"expected one picture container, found {len(blocks)}"
    return [json.loads(el.proto.spec) for el in blocks[0].get("plotly_chart")]


def table(at: AppTest, column: str):
    """The first dataframe the page rendered that has a column named `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def decode(array) -> np.ndarray:
    """Plotly 6+ sends numeric arrays as {dtype, bdata (base64), shape}; plain lists pass through."""
    if isinstance(array, dict) and "bdata" in array:
        out = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        if shape:
            out = out.reshape([int(n) for n in str(shape).split(",")])
        return out
    return np.asarray(array, dtype=object)


def all_text(at: AppTest) -> str:
    """Every markdown, caption and alert text of the page, joined: for checking rendered numbers."""
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader"):
        parts += [str(el.value) for el in at.get(kind)]
    return "\n".join(parts)


def predict(at: AppTest, qid: str, answer: str | None = None) -> AppTest:
    """Answer the page's predict-first question `qid` (ui.predict) and check it. `answer` None picks the first
    option of a choice question (a radio, or a selectbox past ui.predict.MAX_RADIO_OPTIONS). The question's
    widgets are keyed `<qid>_answer` and `<qid>_check`."""
    radios = [r for r in at.radio if r.key == f"{qid}_answer"]
    boxes = [b for b in at.selectbox if b.key == f"{qid}_answer"]  # a question of many options (ui.predict)
    if radios:
        radios[0].set_value(unescaped(radios[0].options[0]) if answer is None else answer)  # options come escaped
    elif boxes:
        boxes[0].set_value(boxes[0].options[0] if answer is None else answer)
    else:
        at.text_input(key=f"{qid}_answer").set_value(answer)
    at.button(key=f"{qid}_check").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def unescaped(markdown: str) -> str:
    """What the reader sees of escaped text (the word joiner that stops GFM autolinks is invisible)."""
    return re.sub(r"\\(.)", r"\1", markdown, flags=re.S).replace(WORD_JOINER, "")


def fresh_visit(page: str | None, query: dict[str, str]) -> AppTest:
    """A first visit from a link: the query is there before the first run, as in a new browser tab; then
    views/<page>.py (None: the default page)."""
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page is not None:
        at.switch_page(page_file(page)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def widget(at: AppTest, kind: str, key: str):
    """The page's widget of AppTest accessor `kind` ("slider", "selectbox", ...) keyed `key`."""
    return getattr(at, kind)(key=key)


def fragment_of(at: AppTest, element) -> str | None:
    """The id of the st.fragment `element` (a widget) was drawn in, None outside any fragment: what the browser sends
    with the rerun request of a change of that widget (AppSession turns it into RerunData(fragment_id=...))."""
    metadata = at._session_state._state._new_widget_state.widget_metadata.get(element.id)
    return metadata.fragment_id if metadata is not None else None


def change_as_browser(at: AppTest, kind: str, key: str, value) -> list:
    """Set widget `key` to `value` and rerun what a browser's request would rerun: only the widget's fragment when it
    is drawn in one (AppTest's own run() always reruns the whole script, TESTING.md), else the whole script.

    Returns the elements that run produced (the fragment's, or the whole page's), as `signatures` lists them. The
    AppTest keeps the whole page's element tree afterwards, as the browser keeps the page and replaces only the
    fragment's part; bench/bench_pages.py times this same call."""
    element = widget(at, kind, key)
    element.set_value(value)
    fragment_id = fragment_of(at, element)
    if fragment_id is None:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return signatures(at._tree)
    return signatures(rerun_fragment(at, fragment_id))


def rerun_fragment(
    at: AppTest, fragment_id: str, page_script_hash: str | None = None, states=None, query_string: str | None = None
):
    """Run only the fragment `fragment_id`, sending every widget's value as the browser would; returns the elements that
    run produced, and leaves the AppTest holding the whole page (the browser keeps it and replaces the fragment's
    part). `page_script_hash`, `states`, `query_string`: the page the browser believes it shows, its widgets' values
    and its URL's query, when not the session's (a run_every tick sent before the browser heard of a st.switch_page,
    ui.fragment.polled)."""
    from streamlit.testing.v1 import local_script_runner

    full_tree = at._tree
    if states is None:
        states = full_tree.get_widget_states()  # every widget of the page, as the browser sends them
    plain = local_script_runner.RerunData
    browser = {"page_script_hash": page_script_hash, "query_string": query_string}
    browser = {k: v for k, v in browser.items() if v is not None}
    local_script_runner.RerunData = lambda *a, **kw: plain(*a, **{**kw, **browser}, fragment_id=fragment_id)
    try:
        at._run(states)
    finally:
        local_script_runner.RerunData = plain
    fragment_tree = at._tree
    assert not fragment_tree.exception, [e.value for e in fragment_tree.exception]
    at._tree = full_tree
    return fragment_tree


def signatures(tree) -> list[str]:
    """Every leaf element of an AppTest element tree as comparable text (its type and its protobuf message, which
    holds what the browser is sent: a chart's spec, a table's Arrow bytes, a text's body), in page order."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop(0)
        children = getattr(node, "children", None)
        if children:
            todo = list(children.values()) + todo
        elif getattr(node, "proto", None) is not None and type(node).__name__ not in ("Block", "ElementTree"):
            out.append(_DEFERRED_FILE.sub("", f"{type(node).__name__}:{node.proto}"))
    return out


# Not what a page computes: a download button's file id is fresh on every run, and `set_value` only tells the browser
# to overwrite what it holds with the value sent (ui.predict empties an answer when its question changes, sending
# value "": a fresh page sends no value, which the browser shows as the same empty field).
_DEFERRED_FILE = re.compile(r'deferred_file_id: "[0-9a-f]+"\n?|set_value: true\n?|^value: ""\n?', re.M)


def page_after_fragment_rerun(stem: str, kind: str, key: str, a, b) -> tuple[list[str], list[str]]:
    """(what the browser shows, what a plain whole-script run shows) when widget `key` of views/<stem>.py moves from
    `a` to `b`: the page at `a` with its `a`-fragment's elements replaced by the `b`-fragment run's, against the page
    run from scratch at `b`. Equal multisets mean no element outside the fragment depends on the widget (nothing
    on screen goes stale) and the fragment computes what the plain run computes. Compared as sorted lists: a
    fragment's elements may sit anywhere in the page."""
    at = open_page(stem)
    change_as_browser(at, kind, key, b)
    fragment_a = change_as_browser(at, kind, key, a)  # the fragment's elements at `a`, and the page at `a`
    page_a = signatures(at._tree)
    fragment_b = change_as_browser(at, kind, key, b)
    shown = list(page_a)
    for sig in fragment_a:
        shown.remove(sig)  # multiset difference: what the fragment drew at `a` is replaced
    shown += fragment_b
    plain = open_page(stem)
    widget(plain, kind, key).set_value(b)
    plain.run()
    assert not plain.exception, [e.value for e in plain.exception]
    return sorted(shown), sorted(signatures(plain._tree))
