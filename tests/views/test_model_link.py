"""The selected model's version in the URL (ui.models): a link selects it, says when this server lacks it, and
a model page falls back to a transformer instead of stopping when the selection does not load."""

import json
import shutil

import pytest
from apptest import all_text, fresh_visit, open_page, unescaped
from streamlit.testing.v1 import AppTest

import ui.models

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")


def manifest_version(bundle_dir) -> str:
    return json.loads((bundle_dir / "manifest.json").read_text())["version"]


def sidebar_text(at: AppTest) -> str:
    return unescaped("\n".join(str(e.value) for kind in ("warning", "caption") for e in at.sidebar.get(kind)))


def test_the_url_carries_the_selected_version_and_follows_the_picker(trained_bundle_path):
    at = open_page("temperature", bundle=("mine", trained_bundle_path))
    assert at.query_params["model"] == manifest_version(trained_bundle_path)
    at.sidebar.selectbox(key="lab_bundle").set_value(ui.models.SHIPPED_LABEL).run()
    assert at.query_params["model"] == manifest_version(ui.models.SHIPPED_DIR)


def test_a_link_to_a_version_this_server_lacks_says_so_and_names_what_is_shown():
    at = open_page("temperature", {"model": "0123456789abcdef"})
    text = sidebar_text(at)
    assert "asks for model version '0123456789abcdef', which this server does not have" in text
    assert f"showing '{ui.models.SHIPPED_LABEL}' instead" in text
    crafted = open_page("temperature", {"model": "![x](http://198.51.100.7/x.png)"})
    warning = next(w.value for w in crafted.sidebar.warning if "does not have" in w.value)
    assert "](" not in warning.replace("\\]", "").replace("\\(", "")  # quoted as text, never a live image


def test_a_link_to_an_installed_registry_version_selects_it_in_a_fresh_session(
    trained_bundle_path, tmp_path, monkeypatch
):
    version = manifest_version(trained_bundle_path)
    shutil.copytree(trained_bundle_path, tmp_path / "versions" / version / "bundle")
    monkeypatch.setattr(ui.models, "REGISTRY_DIR", tmp_path)
    at = fresh_visit(None, {"model": version})
    assert at.sidebar.selectbox(key="lab_bundle").value == f"Version {version[:12]} (from the link)"
    assert f"Version `{version}`" in sidebar_text(at)
    assert at.query_params["model"] == version


def test_a_model_page_falls_back_to_the_shipped_default_when_the_selection_does_not_load(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    at = open_page("anatomy", bundle=("broken run", broken))
    text = unescaped(all_text(at))
    assert "The selected model cannot be loaded; this page shows the shipped default instead" in text
    assert f"(version {manifest_version(ui.models.SHIPPED_DIR)})" in text.replace("`", "")
    assert at.dataframe, "the page renders with the fallback model"


def test_a_reload_finds_a_model_trained_on_the_page_by_the_version_in_its_link(
    trained_bundle_path, tmp_path, monkeypatch
):
    """A run kept under the runs directory (the run record) is found again by a fresh session whose URL
    names its version: what a reload, or a link shared by its owner, does."""
    from core.runs import run_record

    run_dir = tmp_path / "runs" / "job123"
    shutil.copytree(trained_bundle_path, run_dir / "bundle")
    version = manifest_version(trained_bundle_path)
    run_record.write_record(
        run_dir,
        bundle_path=run_dir / "bundle",
        version=version,
        label="tiny on my text",
        owner_token="another-session",
        corpus_text=None,
    )
    monkeypatch.setattr(ui.models, "RUNS_DIR", tmp_path / "runs")
    at = fresh_visit(None, {"model": version})
    assert at.sidebar.selectbox(key="lab_bundle").value == f"Version {version[:12]} (from the link)"
    assert f"Version `{version}`" in sidebar_text(at)
