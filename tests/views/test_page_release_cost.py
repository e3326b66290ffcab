"""The Release page's section 5, "What it costs": nothing is timed until "Measure the cost" is pressed; then the
table holds core.telemetry.cost's rows (storage bytes as counted from the files) and the chart of p95 against class
size draws the report's curve with the target line; a bundle whose training text cannot be read back gets a
one-line warning, not a traceback."""

import pytest
from apptest import decode, figure, open_page, table

import ui.models
from core.model.bundle import load_bundle, save_bundle
from core.model.corpus import load_corpus
from core.model.gpt import PRESETS
from core.model.train_config import TrainConfig
from core.model.training import train
from views.release import cost_view

TEXT = "\n\n".join(f"def mul{i}(a, b):\n    return a * b + {i}\n" for i in range(60))
TITLE = "p95 wait and time to a suggestion by class size"


@pytest.fixture(scope="module")
def file_bundle(tmp_path_factory):
    """A tiny bundle trained on a text file that stays where it was, so the page can read its held-out split."""
    tmp = tmp_path_factory.mktemp("cost_page")
    (tmp / "mul.py").write_text(TEXT, encoding="utf-8")
    corpus = load_corpus(tmp / "mul.py")
    config = TrainConfig(batch_size=4, max_iters=8, warmup_iters=1, eval_interval=8, eval_iters=1, num_threads=1)
    result = train(PRESETS["tiny"], config, corpus)
    return save_bundle(
        tmp / "bundle",
        result.model,
        result.tokenizer,
        metrics=result.metrics,
        command=["tests", "cost page"],
        corpus=corpus,
        train_config=config,
    )


@pytest.fixture
def page_env(tmp_path, monkeypatch, fresh_streamlit_caches):
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", tmp_path / "registry")
    monkeypatch.setenv("LAB_TELEMETRY_DB", str(tmp_path / "telemetry.db"))
    return tmp_path


def test_the_cost_is_measured_on_the_button_and_shown_as_a_table_and_a_chart(file_bundle, page_env):
    at = open_page("release", timeout=120, bundle=("bundle under test", file_bundle))
    assert [t.label for t in at.tabs][-1] == "What it costs"
    assert not [d for d in at.dataframe if "figure" in d.value.columns]  # nothing timed before the press
    assert any("Measure the cost" in i.value for i in at.info)
    at.button(key="rel_cost").click().run()
    assert not at.exception, [e.value for e in at.exception]
    rows = table(at, "figure").set_index("figure")
    assert list(rows.columns) == ["value", "unit"]
    size = sum(p.stat().st_size for p in file_bundle.iterdir())
    assert rows.loc["bundle", "value"] == f"{size:,}" and rows.loc["bundle", "unit"] == "bytes"
    assert rows.loc["registry", "value"] == "0" and rows.loc["telemetry database", "value"] == "0"
    for name in ("training compute", "suggestion time p95", "serving CPU per 1,000 suggestions", "wait p95"):
        assert name in rows.index
    # the chart draws the cached report's curve, and the target as a horizontal line
    version = load_bundle(file_bundle).version  # the cache's key: the same measurement, not a new one
    report, _ = cost_view._measured(
        version, str(file_bundle), None, str(page_env / "registry"), str(page_env / "telemetry.db"), None
    )
    q = report.queueing
    assert rows.loc["largest class within the target", "value"] == f"{q.largest_class:,}"
    fig = figure(at, TITLE)
    x = [int(v) for v in decode(fig["data"][1]["x"])]
    y = [None if v is None else float(v) for v in decode(fig["data"][1]["y"])]
    assert x == [p.learners for p in q.curve]
    assert y == [p.sojourn_p95_ms for p in q.curve]
    assert any(s["y0"] == q.latency_target_ms == s["y1"] for s in fig["layout"]["shapes"])
    assert any(f"up to {q.largest_class:,} learners" in c.value for c in at.caption)


def test_a_bundle_whose_text_is_gone_gets_a_warning(trained_bundle_path, page_env):
    at = open_page("release", timeout=120, bundle=("bundle under test", trained_bundle_path))
    at.button(key="rel_cost").click().run()
    assert not at.exception, [e.value for e in at.exception]
    [warning] = [w.value for w in at.warning if "The cost could not be measured" in w.value]
    assert "cannot be read back" in warning and "upload the bundle's training text at the top of the page" in warning
    assert not [d for d in at.dataframe if "figure" in d.value.columns]
