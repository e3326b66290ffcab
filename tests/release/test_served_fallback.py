"""The registry's served version in the app: default selection, the fallback banner, n-gram suggestions."""

import json
import stat

import pytest
from apptest import APP, all_text, page_file
from streamlit.testing.v1 import AppTest

import ui.models
from core.model.bundle import save_bundle
from core.model.corpus import load_corpus
from core.model.gpt import PRESETS
from core.model.train_config import TrainConfig
from core.model.training import train
from core.release.evaluation.eval_report import EvalConfig
from core.release.gate.rubric import ReleasePolicy
from core.release.registry.registry import promote
from core.release.registry.served import resolve_version
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import policy_from_manifest
from ui.text import WORD_JOINER


def suggestion_after(predictor, text, policy, template="{prompt}"):
    """The suggestion a surface serves after `text`: the prompt encoded once (prompt_for), then the one serving call."""
    return suggest(predictor, prompt_for(predictor, text, policy, template=template), policy).suggestion_or_raise()


TEXT = "\n\n".join(f"def g{i}(y):\n    return y - {i % 5}\n" for i in range(80))
# A known-good version in seconds: only the beats-the-baselines comparison is waived (as in test_registry).
POLICY = ReleasePolicy(
    require_beats_baseline=False,
    evaluation=EvalConfig(max_positions=500, typing_chars=300, segment_chars=100, latency_samples=0),
)


@pytest.fixture
def registry(tmp_path, monkeypatch, fresh_streamlit_caches):
    (tmp_path / "toy.py").write_text(TEXT)
    corpus = load_corpus(tmp_path / "toy.py")
    cfg = TrainConfig(
        batch_size=8,
        max_iters=20,
        warmup_iters=2,
        eval_interval=20,
        eval_iters=1,
        learning_rate=5e-3,
        min_lr=5e-4,
        num_threads=1,
    )
    result = train(PRESETS["tiny"], cfg, corpus)
    bundle = save_bundle(
        tmp_path / "a", result.model, result.tokenizer, metrics={}, command=["test"], corpus=corpus, train_config=cfg
    )
    reg = tmp_path / "registry"
    promoted = promote(bundle, reg, policy=POLICY)
    assert promoted.promoted, promoted.reason
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", reg)
    return reg, promoted.version


def run_page(page: str | None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if page:
        at.switch_page(page_file(page)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_released_version_is_selected_first_and_served_without_a_banner(registry):
    reg, version = registry
    at = run_page(None)
    assert at.sidebar.selectbox(key="lab_bundle").value == ui.models.RELEASED_LABEL
    assert version in all_text(at) or any(version in c.value for c in at.sidebar.caption)
    assert not [w for w in at.warning if "Serving" in w.value]


def test_a_tampered_current_version_falls_back_to_the_ngram_with_a_banner_and_still_suggests(registry):
    reg, version = registry
    weights = reg / "versions" / version / "bundle" / "model.safetensors"
    weights.chmod(stat.S_IRUSR | stat.S_IWUSR)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    served = resolve_version(reg)
    assert served.kind == "ngram" and served.degraded

    # app.py draws the banner above every page; AppTest keeps app.py's own elements only on the first page.
    at = run_page(None)
    banner = [w.value for w in at.warning if w.value.startswith("Serving ngram version")]
    assert banner and served.version in banner[0] and version in banner[0] and "fails to load or verify" in banner[0]

    at = run_page("autocomplete")
    at.text_area(key="ac_prompt").set_value("def main(").run()
    assert "Serving the ngram baseline" in all_text(at)
    # the fallback's suggestion is the one policy's, at the threshold its manifest records (computed apart here)
    manifest = served.bundle.manifest
    expected = suggestion_after(served.bundle.predictor, "def main(", policy_from_manifest(manifest))
    if expected.text and expected.shown:
        assert f"Quoted: {json.dumps(expected.text, ensure_ascii=False)}" in [t.value.split(" (")[0] for t in at.text]
    elif expected.text:  # below its threshold: the quiet best guess
        assert "The model's best guess, not offered" in all_text(at)
    else:
        assert "No suggestion" in all_text(at)
    assert f"{expected.probability:.4f}" in [m.value for m in at.metric]

    at = run_page("inspector")  # a transformer view says why it cannot show the baseline
    assert "has no attention to show" in all_text(at)


def test_a_metric_of_1e400_in_the_current_manifest_shows_a_banner_not_the_exception_box(registry):
    """1e400 is valid JSON that json.loads makes inf: the sidebar's version lookup raised "Out of range float values
    are not JSON compliant" and every page showed the exception box."""
    reg, version = registry
    manifest = reg / "versions" / version / "bundle" / "manifest.json"
    manifest.chmod(stat.S_IRUSR | stat.S_IWUSR)
    data = json.loads(manifest.read_text())
    data["training"]["metrics"]["peak"] = "OVERFLOW"
    manifest.write_text(json.dumps(data).replace('"OVERFLOW"', "1e400"))  # json.dumps cannot write it
    at = run_page(None)  # no exception box (run_page asserts it)
    shown = [w.value.replace("\\", "").replace(WORD_JOINER, "") for w in at.warning]  # as the reader sees it
    banner = [w for w in shown if w.startswith("Serving ngram version")]
    assert banner and "manifest.json: field 'training.metrics.peak' holds 1e400" in banner[0], shown
