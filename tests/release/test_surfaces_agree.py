"""The page, the CLI and the evaluation give the same suggestion for the same prompt.

Three surfaces, one policy (core.release.serving.policy): the Autocomplete page (AppTest), `python -m core suggest
--json` (cli.main.main) and the evaluation's simulated typist (core.release.evaluation.typing_sim.typing_trace on a
one-document held-out text that starts with the prompt, read right after it, then choose_cut at the recorded threshold).
The bundle is a tiny model trained briefly on a repetitive Python text, so it does suggest, with a tuned threshold
recorded that some of these suggestions clear and some do not. Its prompt template is "{prompt}", the raw stream the
evaluation reads.

Long prompts (issue 27): a second bundle with the shipped model's context (128) is asked after prompts of 110 and 128
characters (longer than the 104 a suggestion reads, prompt_window(128, 24), but within the context) and of 200 (longer
than the context). The surfaces still agree, and the ids the model is fed for the suggestion are exactly the
Prompt it is described by (core.model.prompt.encode_for_model with room = the policy's longest suggestion), and the
evaluation's typist, which cuts its stream to the same window, reads the same ids.
"""

import json

import pytest
import torch
from apptest import open_page
from bundles import train_tiny_bundle

from cli.main import main as cli_main
from core.model.batches import document_stream
from core.model.corpus import Document
from core.model.gpt import GPT
from core.model.prompt import encode_for_model
from core.release.evaluation.tuning import record_policy
from core.release.evaluation.typing_sim import Segment, choose_cut, typing_trace
from core.release.serving.policy import SuggestionPolicy, policy_from_manifest
from core.release.serving.transformer_predictor import load_predictor

pytestmark = pytest.mark.usefixtures("fresh_streamlit_caches")  # st.cache_* is shared across AppTests

ITERS = 300  # the tiny preset learns "def addN(a, b):\n    return a + b * N" well enough to suggest (about 5 s)
THRESHOLD = 0.5
PROMPTS = {
    "empty": "",  # the model starts from <eos>: the start of a document
    "mid-word": "    ret",
    "after a newline": "def add3(a, b):\n",
    "mid-line": "def add7(a, b):\n    return a + ",
    "mid-signature": "def add3(",
}
LONG_CONTEXT = 128  # the shipped model's: a suggestion of up to 24 characters reads the last max(128 - 24, 64) = 104
# The training text's pattern, long enough to cut any prompt length from its end (which is mid-line, where it suggests)
PATTERN = (
    "".join(f"def add{i}(a, b):\n    return a + b * {i}\n\n" for i in range(3, 12)) + "def add7(a, b):\n    return a + "
)
LONG_PROMPTS = {f"{n} characters": PATTERN[-n:] for n in (110, 128, 200)}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    path = train_tiny_bundle(tmp_path_factory.mktemp("surfaces") / "bundle", iters=ITERS)
    record_policy(path, SuggestionPolicy(threshold=THRESHOLD, tuned=True))
    predictor, manifest = load_predictor(path)
    assert manifest["prompt_template"] == "{prompt}"  # what the evaluation's stream reads
    assert policy_from_manifest(manifest) == SuggestionPolicy(threshold=THRESHOLD, tuned=True)
    return path, predictor


@pytest.fixture(scope="module")
def long_bundle(tmp_path_factory):
    path = train_tiny_bundle(tmp_path_factory.mktemp("long") / "bundle", iters=ITERS, context_length=LONG_CONTEXT)
    record_policy(path, SuggestionPolicy(threshold=THRESHOLD, tuned=True))
    predictor, _ = load_predictor(path)
    assert predictor.model.config.context_length == LONG_CONTEXT
    return path, predictor


def from_page(path, prompt) -> dict:
    at = open_page("autocomplete", bundle=("surfaces bundle", path))
    at.text_area(key="ac_prompt").set_value(prompt).run()
    assert not at.exception, [e.value for e in at.exception]
    records = [json.loads(c.value) for c in at.code if c.proto.language == "json"]
    records = [r for r in records if isinstance(r, dict) and "suggestion" in r]
    assert len(records) == 1, [c.value for c in at.code]
    return records[0]


def from_cli(path, prompt, capsys, *flags) -> dict:
    capsys.readouterr()
    assert cli_main(["suggest", "--bundle", str(path), "--prompt", prompt, "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def from_evaluation(predictor, prompt, rest):
    """The typist's offer right after `prompt` in a held-out document `prompt + rest`: (the cut shown at the
    threshold, or None; the cut the page names when none clears it; the document's stream ids; the position)."""
    doc = Document("held-out#0", prompt + rest)
    ids = document_stream([doc], predictor.tokenizer).tolist()  # the document, then <eos>
    # Every position of the document is typed (typing_segments skips position 0, which the empty prompt needs:
    # there the context is empty and the policy starts from <eos>, as the page does).
    trace = typing_trace(predictor, ids, [Segment(0, 0, len(doc.text))], SuggestionPolicy(threshold=THRESHOLD))
    cuts = trace[len(prompt)]
    shown = choose_cut(cuts, THRESHOLD)
    # Below the threshold the page still names the cut worth most (Proposal.choose's pool of all cuts):
    # choose_cut at threshold 0 is that choice on the trace.
    return shown, shown if shown is not None else choose_cut(cuts, 0.0), ids, len(prompt)


@pytest.mark.numerics
@pytest.mark.parametrize("prompt", PROMPTS.values(), ids=PROMPTS.keys())
def test_page_cli_and_evaluation_give_the_same_suggestion(bundle, prompt, capsys):
    assert_surfaces_agree(*bundle, prompt, capsys)


@pytest.mark.numerics
@pytest.mark.parametrize("prompt", LONG_PROMPTS.values(), ids=LONG_PROMPTS.keys())
def test_page_cli_and_evaluation_agree_after_prompts_longer_than_the_window(long_bundle, prompt, capsys):
    assert len(prompt) in (110, 128, 200)
    assert_surfaces_agree(*long_bundle, prompt, capsys)


def record_prefills(monkeypatch) -> list[list[int]]:
    """Every row of ids the model is fed as the first positions of a KV cache (a continuation's prompt), in order."""
    fed: list[list[int]] = []
    real = GPT.forward

    def forward(self, idx, cache=None, **kwargs):
        if cache is not None and cache.length == 0:
            fed.extend(idx.tolist())  # (B, T) -> B rows of T ids
        return real(self, idx, cache, **kwargs)

    monkeypatch.setattr(GPT, "forward", forward)
    return fed


@pytest.mark.parametrize("n", [110, 128, 200])
def test_the_model_reads_exactly_the_ids_the_prompt_is_described_by(long_bundle, n, capsys, monkeypatch):
    """What the model reads for a suggestion (the ids fed to its KV cache, captured at GPT.forward) is the Prompt
    of encode_for_model(..., room=max_chars): its `window` is 104 of 128 by hand, and a prompt of 105-128 characters is
    `truncated`. Under the old rule (a prompt described by its last 128 characters, room 0, while the suggestion read
    104) the description of a 110- or 128-character prompt says "not truncated" and names ids the model never reads."""
    path, predictor = long_bundle
    prompt, tok = PATTERN[-n:], predictor.tokenizer
    max_chars = SuggestionPolicy().max_chars
    encoded = encode_for_model(tok, prompt, LONG_CONTEXT, room=max_chars)
    assert (max_chars, encoded.window) == (24, 104)  # by hand: max(128 - 24, 128 // 2, 1)
    assert encoded.ids == tuple(tok.encode(prompt[n - 104 :]))  # the last 104 characters, one token each
    assert encoded.truncated and encoded.dropped == n - 104 and encoded.n_tokens == n

    fed = record_prefills(monkeypatch)
    with pytest.raises(ValueError, match="longer than the 104"):  # the whole text is refused, never cut a second time
        next(predictor.continuations([tok.encode(prompt)], max_chars))
    assert fed == []
    stream = tok.encode(prompt)
    typing_trace(predictor, stream + tok.encode("x"), [Segment(0, n, n + 1)], SuggestionPolicy())  # the typist
    assert fed == [list(encoded.ids)]

    fed.clear()
    from_cli(path, prompt, capsys)  # the served suggestion, as the CLI computes it
    assert fed and all(row == list(encoded.ids) for row in fed), (len(encoded.ids), [len(row) for row in fed])


def assert_surfaces_agree(path, predictor, prompt, capsys):
    cli = from_cli(path, prompt, capsys, "--best-guess")  # the command the page names beside its suggestion
    page = from_page(path, prompt)
    # Served without the best guess, the same offer when there is one, and no text when there is none
    served = from_cli(path, prompt, capsys)
    assert (served["suggestion"], served["shown"]) == ((cli["suggestion"], True) if cli["shown"] else ("", False))
    assert cli["suggestion"], "the trained bundle should suggest something after this prompt"
    assert page["suggestion"] == cli["suggestion"]
    # The same computation, in another Python thread: AppTest runs the page in a script thread, whose torch thread
    # count is its own (OpenMP's is per thread), so under LAB_TEST_THREADS=2 the partial sums of a float32 logit
    # (d_model terms) are added in another order, once per suggested character.
    rel = torch.finfo(torch.float32).eps * predictor.model.config.d_model * max(1, len(cli["suggestion"]))
    assert page["probability"] == pytest.approx(cli["probability"], rel=rel, abs=0)
    assert page["shown"] == cli["shown"] == (cli["probability"] >= THRESHOLD)
    assert page["threshold"] == cli["threshold"] == THRESHOLD and page["threshold_tuned"] is cli["threshold_tuned"]
    assert page["completion"] == cli["completion"] and page["saves_keystrokes"] == cli["saves_keystrokes"]

    # The evaluation, on a document that goes on with the suggestion: its cut must be those very characters.
    text = cli["suggestion"]
    shown, best, ids, i = from_evaluation(predictor, prompt, text + " # and the file goes on\n")
    assert best is not None and best.chars == len(text) and best.matches  # the same characters...
    assert predictor.tokenizer.decode(ids[i : i + best.chars]) == text
    # ... with the same probability, up to float32 rounding of logits computed in a batch of other positions
    assert best.probability == pytest.approx(cli["probability"], rel=1e-5, abs=1e-12)
    assert (shown is not None) == cli["shown"]  # offered by the typist exactly when the page says "shown"

    # Whatever follows the prompt, the typist's offer there is the same (it reads only the text before it);
    # only whether the text goes on with it changes.
    # (Its probability up to the rounding above: the document is typed in batches of its positions, and on two threads
    # a batch of another length splits its sums differently.)
    _, other, _, _ = from_evaluation(predictor, prompt, "\u00a7 unrelated\n")
    assert (other.chars, other.matches) == (best.chars, False)
    assert other.probability == pytest.approx(best.probability, rel=rel, abs=0)


@pytest.mark.numerics
def test_the_prompts_cover_shown_and_not_shown(bundle, capsys):
    """The agreement above is held on both sides of the threshold (else a surface ignoring it would pass)."""
    path, _ = bundle
    shown = {from_cli(path, p, capsys)["shown"] for p in PROMPTS.values()}
    assert shown == {True, False}
