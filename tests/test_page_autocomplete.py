"""The autocomplete page, with a tiny seeded bundle: the candidate bars are the model's distribution
(computed here independently), temperature changes them, the completion is what greedy decoding gives,
parity is shown below its tolerance, and long, empty, unseen and unsafe inputs are explained."""
import math

import pytest
import torch
from streamlit.testing.v1 import AppTest

from apptest import all_text, decode, figures, open_page
from core.bundle import load_bundle, save_bundle
from core.corpus import corpus_from_text
from core.model import GPT, preset
from core.tokenizer import EOS_ID, CharTokenizer

TEXT = "def main(x):\n    return x + 1\n\nimport os\nclass Point:\n    pass\n"
LABEL = "tiny test bundle"

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests


def _save(path, unsafe_reason=None):
    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(0)
    model = GPT(preset("tiny", tok.vocab_size))
    with torch.no_grad():  # larger random weights than the init, so the distribution is far from uniform
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.3)
    return save_bundle(path, model.eval(), tok, metrics={}, command=["tests/test_page_autocomplete.py"],
                       corpus=corpus_from_text("toy.py", TEXT), unsafe_reason=unsafe_reason)


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("ac") / "tiny")


def open_autocomplete(path, query=None) -> AppTest:
    """app.py with `path` as this session's selected bundle, switched to the autocomplete page."""
    return open_page("autocomplete", {"ac_length": "20", **(query or {})}, bundle=(LABEL, path))


def figure(at, title_part):
    found = [f for f in figures(at) if title_part in f["layout"]["title"]["text"]]
    assert len(found) == 1, [f["layout"]["title"]["text"] for f in figures(at)]
    return found[0]


def expected_top(path, text, temperature, k=10):
    """The top k (piece, probability) of softmax(logits / temperature), from the model's own forward pass."""
    bundle = load_bundle(path)
    ids = bundle.tokenizer.encode(text)[-bundle.config.context_length:]
    with torch.no_grad():
        logits = bundle.model(torch.tensor([ids])).logits[0, -1].tolist()
    top = max(logits)
    exps = [math.exp((x - top) / temperature) for x in logits]
    probs = [e / math.fsum(exps) for e in exps]
    order = sorted(range(len(probs)), key=lambda i: -probs[i])[:k]
    return [bundle.tokenizer.display_piece(i) for i in order], [probs[i] for i in order]


def bars(at):
    fig = figure(at, "next characters")
    return list(fig["data"][0]["x"]), [float(y) for y in decode(fig["data"][0]["y"])]


def test_candidate_bars_are_the_models_distribution(bundle_path):
    at = open_autocomplete(bundle_path)
    pieces, probs = bars(at)
    want_pieces, want_probs = expected_top(bundle_path, "def main(", 1.0)
    assert pieces == want_pieces
    assert probs == pytest.approx(want_probs, abs=1e-6)
    table = at.dataframe[0].value
    assert list(table["probability"]) == pytest.approx(want_probs, abs=1e-6)
    assert f"{want_probs[0]:.4f}" in all_text(at)
    assert [c.value for c in at.code][0] == "def␣main("  # what the model sees, whitespace visible


def test_changing_temperature_changes_the_candidate_probabilities(bundle_path):
    at = open_autocomplete(bundle_path)
    before = bars(at)[1]
    at.slider(key="ac_temperature").set_value(0.3).run()
    pieces, after = bars(at)
    want_pieces, want_probs = expected_top(bundle_path, "def main(", 0.3)
    assert after != pytest.approx(before, abs=1e-3)
    assert (pieces, after) == (want_pieces, pytest.approx(want_probs, abs=1e-6))
    assert after[0] > before[0]  # colder is sharper


def test_greedy_completion_is_shown_as_plain_text(bundle_path):
    at = open_autocomplete(bundle_path, {"ac_temperature": "0.0", "ac_length": "25"})
    bundle = load_bundle(bundle_path)
    ids = bundle.tokenizer.encode("def main(")
    new = []
    with torch.no_grad():  # greedy decoding written out, without the cache (25 + 9 > 32 slides once)
        start = 0
        for _ in range(25):
            if len(ids) - start > 32:
                start = len(ids) - 16
            token = int(bundle.model(torch.tensor([ids[start:]])).logits[0, -1].argmax())
            if token == EOS_ID:
                break
            new.append(token)
            ids.append(token)
    assert bundle.tokenizer.decode(new) in [c.value for c in at.code]
    assert "exactly the same characters" in all_text(at)


def test_latency_chart_has_both_series_and_the_measured_means(bundle_path):
    at = open_autocomplete(bundle_path)
    fig = figure(at, "Time per generated token")
    assert [t["name"] for t in fig["data"]] == ["with KV cache", "without cache"]
    table = next(d.value for d in at.dataframe if "with cache (ms)" in d.value.columns)
    metrics = {m.label: m.value for m in at.metric}
    for column, label in (("with cache (ms)", "With the cache (mean ms/token)"),
                          ("without cache (ms)", "Without the cache (mean ms/token)")):
        mean = table[column].dropna().mean()
        assert metrics[label] == f"{mean:.2f}"
        assert f"{mean:.2f} ms/token" in all_text(at)  # the summary under the chart


def test_parity_is_shown_below_the_tolerance_across_the_context_boundary(bundle_path):
    at = open_autocomplete(bundle_path, {"ac_length": "40"})  # 9 + 40 characters through a context of 32
    fig = figure(at, "logit difference")
    assert fig["layout"]["yaxis"]["type"] == "log"
    diffs = [float(d) for d in decode(fig["data"][0]["y"]) if d is not None]
    assert diffs and max(diffs) <= 1e-5
    allowed = [float(t) for t in decode(fig["data"][1]["y"])]
    assert all(1e-5 <= a < 1e-4 for a in allowed)  # 1e-5 + 1.3e-6 * |logit|
    table = next(d.value for d in at.dataframe if "max |cached − uncached|" in d.value.columns)
    assert len(table) == 40 and table["window slid"].any()
    assert not table["chosen character differs"].any()
    text = all_text(at)
    assert "PASS" in text and "1e-05 + 1.3e-06·|logit|" in text and "within its allowance" in text


@pytest.mark.parametrize("prompt, message", [
    ("x + 1 " * 10, "it was cut to its last 32 characters (the first 28 are not seen)"),
    ("", "starts from the `<eos>`"),
    ("def €(x):", "U+20AC"),
])
def test_long_empty_and_unseen_prompts_are_explained(bundle_path, prompt, message):
    at = open_autocomplete(bundle_path)
    at.text_area(key="ac_prompt").set_value(prompt).run()
    assert not at.exception
    assert message in all_text(at)
    assert bars(at)[1]  # candidates are still shown
    if "€" in prompt:
        assert "became `<unk>`" in all_text(at)
        assert list(at.dataframe[0].value["character"]) == ["€"]


def test_unsafe_bundle_is_flagged(tmp_path):
    at = open_autocomplete(_save(tmp_path / "unsafe", unsafe_reason="trained on a leaked split"))
    warning = next(w.value for w in at.warning if "not to be trusted" in w.value)
    assert "trained on a leaked split" in warning


def test_a_multi_line_prompt_reaches_the_model_with_its_line_break(bundle_path):
    at = open_autocomplete(bundle_path)
    at.text_area(key="ac_prompt").set_value("def f():\n    return").run()
    assert not at.exception
    shown = [c.value for c in at.code][0]
    assert "↵" in shown and shown.endswith("return".replace(" ", "␣"))
