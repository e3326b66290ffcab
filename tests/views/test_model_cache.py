"""ui.model_cache: each cached computation returns what the uncached core call returns, for every key it is asked
with (a cache keyed on too little would hand one input's result to another)."""

import pytest

from core.model.tokenizer import CharTokenizer
from core.runs.events import attention_snapshot
from ui import model_cache

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def test_attention_snapshot_is_the_core_one_for_each_text_layer_head_and_step(trained_bundle):
    model, tok, version = trained_bundle.model, trained_bundle.tokenizer, trained_bundle.version
    asked = [("def add(a, b):", 0, 0, 5), ("x = 1", 0, 0, 5), ("def add(a, b):", 1, 1, 5), ("x = 1", 0, 0, 7)]
    for text, layer, head, step in asked + asked[:1]:  # the first again: from the cache, still its own numbers
        cached = model_cache.attention_snapshot(model, tok, version, text, layer, head, step)
        assert cached == attention_snapshot(model, tok, text, layer=layer, head=head, step=step)
    first = model_cache.attention_snapshot(model, tok, version, *asked[0])
    other_head = model_cache.attention_snapshot(model, tok, version, *asked[2])
    assert first.weights != other_head.weights  # the key tells heads apart, so the check above could fail


@pytest.mark.parametrize("text", ["abc", "hello, world\n", "abc"])
def test_vocabulary_size_is_the_tokenizers_for_the_text(text):
    assert model_cache.vocabulary_size(text, text) == CharTokenizer.from_text(text).vocab_size


def test_the_cached_suggestion_is_the_served_one_for_each_text_and_policy():
    """ui.suggestion_view.cached_suggestion (a rerun's suggestion) against core's suggest, for several texts and two
    policies: the policy's fields are part of the key, so a re-tuned threshold is never served stale."""
    import dataclasses

    from core.model.bundle import load_bundle
    from core.release.serving.autocomplete import prompt_for, suggest
    from core.release.serving.policy import SuggestionPolicy
    from core.release.serving.transformer_predictor import TransformerPredictor
    from ui.models import SHIPPED_DIR
    from ui.suggestion_view import cached_suggestion

    shipped = load_bundle(SHIPPED_DIR)  # the tests' tiny bundle offers no suggestion: the shipped one does
    predictor = TransformerPredictor(shipped.model, shipped.tokenizer)
    loose, strict = SuggestionPolicy(threshold=0.05), SuggestionPolicy(threshold=0.95)
    served = []
    for text in ("def main(", "import o", "def main("):
        for policy in (loose, strict, loose):
            prompt = prompt_for(predictor, text, policy)
            s = cached_suggestion(predictor, shipped.version, prompt.ids, prompt, policy, dataclasses.astuple(policy))
            assert s == suggest(predictor, prompt, policy).suggestion_or_raise()
            served.append(s)
    assert len({(s.text, s.shown) for s in served}) > 1  # texts and policies give different suggestions
