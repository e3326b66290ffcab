"""The suggestion on the Autocomplete page: the one suggestion policy as served, and the Accept action.

The page asks serving for the best guess too (suggest's best_guess), so a suggestion below the threshold is shown
as the model's best guess, not offered.

The page encodes its text once; the suggestion, the next-token bars, the completion and telemetry all read that
one prompt. Accepting runs in the button's callback, before the script, and appends only when the text box still
holds the text the suggestion was made for, so nothing typed meanwhile is lost. Each suggestion served is recorded
in the telemetry once per new (version, text) of a session, and its outcome when the next text decides it; a
telemetry failure changes nothing that is served, and the page says telemetry is not being recorded.
"""

from __future__ import annotations

import dataclasses
import json

import streamlit as st

from core import i18n
from core.i18n import N_, _
from core.model.prompt import Prompt
from core.model.tokenizer import CharTokenizer
from core.release.evaluation.tuning import MIN_ACCEPTANCE
from core.release.serving.autocomplete import prompt_for, suggest
from core.release.serving.policy import MIN_THRESHOLD, Suggestion, SuggestionPolicy, policy_from_manifest
from core.release.serving.predictor import Predictor
from core.telemetry import completions
from core.telemetry.record import next_char_class, outcome, record_suggestion
from core.telemetry.store import TelemetryStore, telemetry_location
from ui import models, warmup
from ui.text import escape_markdown

ACCEPT_LABEL = N_("Accept suggestion")
GUESS_LABEL = N_("Type the guess anyway")  # the button when the suggestion is below the threshold
ACCEPTED_KEY = "ac_accepted"  # session state: (suggestions accepted, keystrokes they saved)
STALE_KEY = "ac_accept_stale"  # session state: the last Accept found the text changed and appended nothing
COMPLETION_RECORDED = "ac_completion_recorded"  # session state: the completion request last recorded
RECORDED_KEY = "ac_telemetry_recorded"  # session state: the (version, text) whose suggestion was last recorded
PENDING_KEY = "ac_telemetry_pending"  # session state: [(event id, suggestion, text before)] not yet decided
MAX_PENDING = 8

STOP_REASONS = {  # a Suggestion's stop_reason -> why it stopped ({threshold}: MIN_THRESHOLD)
    "end of document": N_("the model expects the file to end there"),
    "unlikely": N_("one more character would take its probability below {threshold}, the least ever offered"),
    "limit": N_("it reached the policy's longest suggestion"),
}


def stop_reason(reason: str) -> str:
    """Why the greedy completion stopped, in words (an unknown reason as it is)."""
    if reason not in STOP_REASONS:
        return reason
    return i18n._(STOP_REASONS[reason]).format(threshold=i18n.formatted(MIN_THRESHOLD, "g"))


def page_prompt(predictor: Predictor, text: str, manifest: dict) -> Prompt:
    """`text` encoded once for the page: the bundle's template applied, cut to the window the predictor reads before a
    suggestion of the bundle's policy (the whole context when that policy is unusable: no suggestion reads it)."""
    try:
        policy: SuggestionPolicy | None = policy_from_manifest(manifest)
    except ValueError:  # suggestion_for says so where the suggestion would be
        policy = None
    return prompt_for(predictor, text, policy, template=manifest.get("prompt_template", "{prompt}"))


def suggestion_for(predictor: Predictor, prompt: Prompt, manifest: dict) -> Suggestion | None:
    """The suggestion the bundle serves after `prompt` (page_prompt), or None after a warning saying why there is
    none."""
    try:
        policy = policy_from_manifest(manifest)
    except ValueError as e:
        st.warning(
            _(
                "This bundle records a suggestion policy that is not usable ({error}), so it offers no suggestion. "
                "Tune it again: `python -m core tune --bundle DIR`."
            ).format(error=escape_markdown(e))
        )
        return None
    try:
        version = manifest.get("version")
        if isinstance(version, str) and (
            st.session_state.get(RECORDED_KEY) == (version, prompt.text) or warmup.visiting()
        ):
            # recorded already (a rerun the text did not cause), or no learner's request: what serving computes
            return cached_suggestion(predictor, version, prompt.ids, prompt, policy, dataclasses.astuple(policy))
        if st.session_state.get(RECORDED_KEY) == (version, prompt.text):  # a bundle without a version
            return suggest(predictor, prompt, policy, best_guess=True).suggestion_or_raise()
        return _suggested_and_recorded(predictor, prompt, policy, manifest)
    except ValueError as e:  # a model whose context is too short for the policy's longest suggestion
        st.warning(_("This model cannot offer a suggestion: {error}.").format(error=escape_markdown(e)))
        return None


@st.cache_data(max_entries=256, show_spinner=False)
def cached_suggestion(
    _predictor: Predictor, version: str, ids: tuple, _prompt: Prompt, _policy: SuggestionPolicy, policy: tuple
) -> Suggestion:
    """suggest(...)'s suggestion for the bundle whose version is `version`, once per server for each prompt (its ids,
    `ids`, the template applied) and policy (its fields, `policy`): the policy is greedy, so a rerun the text did
    not cause (a slider beside it) and another learner's same text get the same suggestion; serving it again cost a
    few model steps every rerun. The request that records the suggestion (`_suggested_and_recorded`) still serves
    it, and times it, as the CLI does."""
    return suggest(_predictor, _prompt, _policy, best_guess=True).suggestion_or_raise()


@st.cache_resource(max_entries=4)
def _store(path: str) -> TelemetryStore:
    return TelemetryStore(path)


def telemetry_store() -> TelemetryStore:
    """The server's telemetry store (LAB_DATABASE_URL, else LAB_TELEMETRY_DB, else ./telemetry.db), one per place."""
    return _store(telemetry_location())


def _suggested_and_recorded(
    predictor: Predictor, prompt: Prompt, policy: SuggestionPolicy, manifest: dict
) -> Suggestion:
    """suggest, then record_suggestion (surface 'page') with what it measured, after the outcomes this text decides;
    raises serving's ValueError (recorded first)."""
    store = telemetry_store()
    version = str(manifest.get("version") or "unknown")
    try:
        recorded = _mature(store, prompt.text)
    except Exception:  # noqa: BLE001 - telemetry never changes what is served
        recorded = False
    measured = suggest(predictor, prompt, policy, best_guess=True)
    try:
        event_id = record_suggestion(store, measured, version=version, surface="page", session=models.session_id())
    except Exception as e:  # noqa: BLE001 - telemetry never changes what is served
        store.report_failure(e)
        event_id = None
    s = measured.suggestion_or_raise()
    st.session_state[RECORDED_KEY] = (manifest.get("version"), prompt.text)
    if event_id is not None and s.text:
        pending = st.session_state.setdefault(PENDING_KEY, [])
        pending.append((event_id, s.text, prompt.text))
        del pending[:-MAX_PENDING]
    if event_id is None or not recorded:
        why = store.health().last_error or _("the telemetry database could not be written")
        st.caption(
            _("Telemetry is not being recorded: {why}. The suggestion is served anyway.").format(
                why=escape_markdown(why)
            )
        )
    return s


def _mature(store: TelemetryStore, text: str) -> bool:
    """Record the outcome of every pending suggestion that `text` decides; keep the undecided ones. False when a
    decided outcome could not be written."""
    kept, ok = [], True
    for event_id, suggested, before in st.session_state.get(PENDING_KEY, []):
        decided = outcome(suggested, before, text)
        if decided is None:
            kept.append((event_id, suggested, before))
        else:
            ok = store.set_outcome(event_id, decided, next_char_class(before, text)) and ok
    st.session_state[PENDING_KEY] = kept
    return ok


def visible(s: Suggestion, tokenizer: CharTokenizer) -> str:
    """The suggestion with every space and line break drawn (␣, ↵), as "what the model sees" draws them: a code
    block would drop a leading line break and show trailing spaces as nothing."""
    return "".join(tokenizer.display_piece(i) for i in tokenizer.encode(s.text))


def offer(predictor: Predictor, prompt: Prompt, manifest: dict, key: str) -> Suggestion | None:
    """The suggestion for the text in the text area `key` (its page_prompt, `prompt`): served, shown, with its Accept
    button. Compact, so it sits beside the text box on the page's first screen. Below the threshold an editor would
    not offer it, so neither does the page: it is the model's best guess, drawn small, with a plain button to type it
    anyway; `show_verdict` says why it is or is not offered."""
    s = suggestion_for(predictor, prompt, manifest)
    if s is not None and s.text and not s.shown:
        st.markdown(_("**The model's best guess, not offered**"))
        st.caption(
            _(
                "{guess} (probability {probability}, below the threshold {threshold}: an editor would not show it)"
            ).format(
                guess=escape_markdown(visible(s, predictor.tokenizer)),
                probability=i18n.number(s.probability, 4),
                threshold=i18n.number(s.threshold, 2),
            )
        )
    else:
        st.markdown(_("**Suggestion** (what Tab would insert)"))
        if s is not None:
            show_offer(s, predictor.tokenizer)
    accept_button(key, prompt.text, s)
    return s


def section(predictor: Predictor, prompt: Prompt, manifest: dict, key: str) -> Suggestion | None:
    """The whole suggestion block for the text in the text area `key`: served, shown, with its Accept button."""
    s = offer(predictor, prompt, manifest, key)
    if s is not None:
        show_verdict(s)
        show_numbers(s)
    return s


def show_offer(s: Suggestion, tokenizer: CharTokenizer) -> None:
    """What Tab would insert: drawn with visible spaces and line breaks, then quoted."""
    if s.text:
        st.code(visible(s, tokenizer), language=None)
        st.text(_("Quoted: {text} (␣ is a space, ↵ a line break)").format(text=json.dumps(s.text, ensure_ascii=False)))
    else:
        st.info(
            _(
                "No suggestion: the model's most likely continuation has no stretch long enough to save a keystroke "
                "that ends where a word, a run of spaces or a line ends and still has probability {threshold}."
            ).format(threshold=i18n.formatted(MIN_THRESHOLD, "g"))
        )


def show_verdict(s: Suggestion) -> None:
    """Why an editor offers it: the probability against the threshold (a best guess says why beside it)."""
    if s.text and s.shown:
        st.success(
            _(
                "Offered: its probability {probability} clears the threshold {threshold}, so an editor would offer it "
                "(Tab accepts)."
            ).format(probability=i18n.number(s.probability, 4), threshold=i18n.number(s.threshold, 2))
        )


def show_numbers(s: Suggestion) -> None:
    """Its probability, the threshold and how it was set, the keystrokes it saves, and the CLI's record of it."""
    m = st.columns(3)
    m[0].metric(
        _("Probability"),
        i18n.number(s.probability, 4),
        help=_("That the text goes on with exactly this suggestion."),
    )
    m[1].metric(_("Threshold") if s.tuned else _("Threshold (not tuned)"), i18n.number(s.threshold, 2))
    m[2].metric(
        _("Keystrokes saved") if s.shown or not s.text else _("Keystrokes it would save"),
        f"{s.saves}",
        help=_("If accepted: its characters for one Tab, so a suggestion of k characters saves k - 1 keystrokes."),
    )
    if s.tuned:
        st.caption(
            _(
                "The threshold {threshold} was tuned on the bundle's validation documents: it saves the most "
                "keystrokes there, keeping, where it can, to thresholds whose suggestions are taken at least "
                "{floor}% of the time."
            ).format(threshold=i18n.number(s.threshold, 2), floor=i18n.number(100 * MIN_ACCEPTANCE, 0))
        )
    else:
        st.markdown(  # not a caption: inline code in a caption's grey fails the contrast check (axe)
            _(
                "The threshold {threshold} is the default: threshold not tuned; run `python -m core tune --bundle DIR`."
            ).format(threshold=i18n.number(s.threshold, 2))
        )
    if s.completion:
        if s.text:
            source = _("Cut from the greedy completion {completion}; it stopped because {reason}.")
        else:
            source = _("The greedy completion was {completion}; it stopped because {reason}.")
        st.caption(
            source.format(
                completion=escape_markdown(json.dumps(s.completion, ensure_ascii=False)),
                reason=stop_reason(s.stop_reason),
            )
        )
    with st.expander(_("The same answer from the command line")):
        st.markdown(_("`python -m core suggest --bundle DIR --prompt TEXT --best-guess --json` prints, for this text:"))
        st.code(json.dumps(s.to_dict(), ensure_ascii=False), language="json")


def _accept(key: str, text: str, addition: str) -> None:
    """on_click of Accept: append the suggestion made for `text`, if the text area still holds `text`."""
    if st.session_state.get(key) != text:
        st.session_state[STALE_KEY] = True
        return
    st.session_state[key] = text + addition
    accepted, saved = st.session_state.get(ACCEPTED_KEY, (0, 0))
    st.session_state[ACCEPTED_KEY] = (accepted + 1, saved + max(0, len(addition) - 1))


def accept_button(key: str, text: str, s: Suggestion | None) -> None:
    """The Accept button (disabled when there is nothing to accept) and what accepting has saved so far."""
    if st.session_state.pop(STALE_KEY, False):
        st.info(_("Your text changed as you pressed Accept, so nothing was appended: the suggestion is now for it."))
    guess = s is not None and bool(s.text) and not s.shown  # below the threshold: not offered, typed only if asked
    st.button(
        i18n._(GUESS_LABEL) if guess else i18n._(ACCEPT_LABEL),
        key="ac_accept",
        type="secondary" if guess else "primary",
        disabled=s is None or not s.text,
        on_click=_accept,
        args=(key, text, s.text if s else ""),
        help=_("Appends it to your text (like pressing Tab in an editor); press again to keep going."),
    )
    accepted, saved = st.session_state.get(ACCEPTED_KEY, (0, 0))
    if accepted:
        st.caption(
            _("This session: {accepted} suggestion(s) accepted, {saved} keystroke(s) saved.").format(
                accepted=accepted, saved=saved
            )
        )


def record_completion(bundle, prompt: Prompt, shown, waited_ms: float, settings: tuple) -> None:
    """The completion this session was shown, after `prompt` (page_prompt: the ids it was generated from), into the
    telemetry, once per new request (a rerun caused by another widget records nothing); the latency is what this
    session waited (a cached completion: the lookup)."""
    request = (bundle.version, prompt.text, settings, shown.use_cache)
    if st.session_state.get(COMPLETION_RECORDED) == request or warmup.visiting():
        return
    st.session_state[COMPLETION_RECORDED] = request
    store = telemetry_store()
    recorded = completions.record_completion(
        store, bundle.model, prompt, shown, waited_ms, version=bundle.version, surface="page",
        session=models.session_id(),
    )  # fmt: skip
    if recorded is None:
        why = store.health().last_error or _("the telemetry database could not be written")
        st.caption(
            _("Telemetry is not being recorded: {why}. The completion is shown anyway.").format(
                why=escape_markdown(why)
            )
        )
