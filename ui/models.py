"""Which model bundle the pages use, loaded once per server, and the shared training queue.

The sidebar offers the registry's served version (when anything was promoted), the shipped default, and the
bundles this browser session trained (never another session's). Every load verifies the bundle and is cached
per server, keyed by the files' identity, so an edited bundle is verified again. The version is in the URL, so a
shared link shows the same model, or says plainly which one is shown instead. A transformer page never strands:
it falls back to the registry's served transformer, then the shipped default, and says so.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import streamlit as st

from core import i18n, settings
from core.i18n import N_, _
from core.model.bundle import Bundle, is_version, load_bundle
from core.model.bundle_checks import BundleError
from core.release.baselines.baseline_bundle import BaselineBundle
from core.release.registry.served import CURRENT, VERSIONS, ServedVersion, resolve_version, version_dir
from core.runs import job
from core.runs.events import progress_from_json, result_from_json
from core.runs.queue import JobQueue
from core.runs.run_record import find as find_run
from ui.params import MAX_QUOTED_CHARS, quoted
from ui.startup import SETTING_PROBLEMS, SettingProblem, setting
from ui.text import escape_markdown

SHIPPED_DIR = job.SHIPPED_BASES["code"]  # models/default
SHIPPED_LABEL = N_("Shipped default (Python standard library)")  # the picker's values stay English (format_label)
RUNS_DIR = settings.runs_dir()
REGISTRY_DIR = settings.registry_dir()
RELEASED_LABEL = N_("Released version (registry)")
LINKED_LABEL = N_("Version {version} (from the link)")  # a bundle a link asked for, added to this session's list
MAX_RUNNING = setting(settings.max_training_runs, 1)
_SESSION_BUNDLES = "lab_session_bundles"
PIN = "model"  # the query parameter holding the selected model's version
_PIN_NOTE = "_lab_pin_note"  # a link's version this server does not have, until the learner picks a model


def session_id() -> str:
    """A random id for this browser session: the owner of its training runs."""
    return st.session_state.setdefault("lab_session_id", uuid.uuid4().hex)


def job_queue() -> JobQueue:
    """This worker's handle on the server's training queue, which lives in the runs folder: at most MAX_RUNNING
    runs at once across every worker, each in a process of its own (the runs wing's queue), the rest wait their turn."""
    return _job_queue(str(RUNS_DIR), MAX_RUNNING)


@st.cache_resource
def _job_queue(runs_dir: str, max_running: int) -> JobQueue:
    return JobQueue(runs_dir, max_running, entry=job, read_event=progress_from_json, read_result=result_from_json)


def _identity(path: Path) -> tuple:
    """Size and modification time of every file: changes when a bundle is edited or replaced."""
    try:
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir()))
    except OSError:
        return ()


@st.cache_resource(max_entries=16, show_spinner=False)  # load() draws the spinner, in the reader's language
def _load(path: str, identity: tuple) -> Bundle:
    return load_bundle(path)


_WARM: set[tuple] = set()  # the calls of the two cached loaders below that this process has already answered
_MAX_WARM = 256


def _spinning(message: str, cached, *args):
    """`cached(*args)` under a spinner saying `message` in the reader's language, the first time only: a cached
    function's own show_spinner text is fixed at import, and a spinner on every hit would start a timer thread on
    each of a run's many calls. (After the caches were cleared, a miss may go without its spinner.)"""
    key = (cached.__name__, *args)
    if key in _WARM:
        return cached(*args)
    with st.spinner(message):
        value = cached(*args)
    if len(_WARM) >= _MAX_WARM:
        _WARM.clear()
    _WARM.add(key)
    return value


def load(path: Path) -> Bundle:
    """Verify and load the bundle at `path` (cached per server); raises BundleError."""
    return _spinning(_("Verifying and loading the model bundle..."), _load, str(path), _identity(path))


def session_bundles() -> list[tuple[str, str]]:
    """(label, path) of every bundle this session trained, oldest first."""
    return st.session_state.setdefault(_SESSION_BUNDLES, [])


def add_session_bundle(label: str, path: Path) -> None:
    session_bundles().append((label, str(path)))


def _registry_identity() -> tuple:
    """Changes whenever a promotion, a rollback or an edit of an installed version changes what is served."""
    versions = REGISTRY_DIR / VERSIONS
    stamps = [_identity(REGISTRY_DIR)]
    if versions.is_dir():
        stamps += [(v.name, _identity(v / "bundle")) for v in sorted(versions.iterdir())]
    return tuple(stamps)


@st.cache_resource(max_entries=4, show_spinner=False)
def _resolved_version(registry: str, identity: tuple) -> ServedVersion:
    return resolve_version(registry)


def served_version() -> ServedVersion | None:
    """What the registry serves now, or None when nothing was ever promoted."""
    if not ((REGISTRY_DIR / CURRENT).exists() or (REGISTRY_DIR / VERSIONS).is_dir()):
        return None
    return _spinning(_("Resolving the released version..."), _resolved_version, str(REGISTRY_DIR), _registry_identity())


def choices() -> dict[str, Path | None]:
    """Sidebar label -> bundle directory (None for the registry's served version, resolved on use)."""
    options: dict[str, Path | None] = {RELEASED_LABEL: None} if served_version() is not None else {}
    if SHIPPED_DIR.is_dir():
        options[SHIPPED_LABEL] = SHIPPED_DIR
    for label, path in session_bundles():
        options[label] = Path(path)
    return options


def format_label(label: str, lang: str | None = None) -> str:
    """A picker label as the reader sees it: the lab's own labels in the reader's language (`lang`, else the run's;
    the value, which the session and the tests hold, stays English); a run's label as it was named."""
    if lang is not None:
        with i18n.speaking(lang):
            return format_label(label)
    before, after = LINKED_LABEL.split("{version}")
    if label.startswith(before) and label.endswith(after) and len(label) > len(before) + len(after):
        return i18n._(LINKED_LABEL).format(version=label[len(before) : len(label) - len(after)])
    return i18n._(label) if label in (SHIPPED_LABEL, RELEASED_LABEL) else label


def _describe(bundle: Bundle) -> None:
    arch = bundle.config
    st.caption(
        _(
            "Version `{version}` · {layers} layers, {heads} heads, width {width}, context {context}, "
            "vocabulary {vocabulary}"
        ).format(
            version=bundle.version,
            layers=arch.n_layer,
            heads=arch.n_head,
            width=arch.d_model,
            context=arch.context_length,
            vocabulary=arch.vocab_size,
        )
    )
    if bundle.safe:
        st.caption(_("Safety: passed its training checks (causal mask on)."))
    else:
        reason = bundle.manifest.get("unsafe_reason") or _("marked unsafe")
        st.warning(_("Unsafe bundle: {reason}").format(reason=escape_markdown(reason)))


def version_of(label: str, options: dict[str, Path | None]) -> str | None:
    """The exact version behind a sidebar label (None when it does not load)."""
    path = options.get(label)
    if path is None:
        release = served_version()
        return None if release is None else release.version
    try:
        return load(path).version
    except BundleError:
        return None


def _linked(version: str) -> Path | None:
    """A bundle directory on this server with this exact version: an installed registry version or a run
    trained here (the run record). None when there is none."""
    try:
        vdir = version_dir(REGISTRY_DIR, version) / "bundle"
        if vdir.is_dir():
            return vdir
    except BundleError:
        pass
    record = find_run(RUNS_DIR, version)
    return None if record is None else record.bundle_path


def _apply_pin(options: dict[str, Path | None]) -> None:
    """Select the URL's version before the picker is drawn, adding it to this session's list when the server
    has it but it is not listed; remember a version it does not have for the note."""
    pinned = st.query_params.get(PIN)
    label = st.session_state.get("lab_bundle")
    label = label if label in options else next(iter(options), None)
    if not pinned or (label is not None and version_of(label, options) == pinned):
        return
    match = next((lbl for lbl in options if version_of(lbl, options) == pinned), None)
    if match is None and is_version(pinned) and (path := _linked(pinned)) is not None:
        try:
            load(path)
        except BundleError:
            pass
        else:
            match = LINKED_LABEL.format(version=pinned[:12])
            add_session_bundle(match, path)
            options[match] = path
    if match is not None:
        st.session_state["lab_bundle"] = match
        st.session_state.pop(_PIN_NOTE, None)
    else:
        st.session_state[_PIN_NOTE] = pinned[: MAX_QUOTED_CHARS + 1]


def _pin_selected() -> None:
    """The picker's on_change: the URL follows the learner's choice (and the link's note goes)."""
    st.session_state.pop(_PIN_NOTE, None)
    st.query_params.pop(PIN, None)  # sidebar() writes the new version on this rerun


def sidebar() -> None:
    """The bundle picker with the selected manifest's version and safety status, on every page; the
    selected version goes into the URL."""
    options = choices()
    with st.sidebar:
        st.subheader(_("Model"))
        if not options:
            st.caption(_("No model bundle yet: train one on the Training page."))
            return
        _apply_pin(options)
        lang = i18n.language()  # a format_func may be called outside this run (an AppTest's rerun): bound to it
        label = st.selectbox(
            _("Model bundle"),
            list(options),
            key="lab_bundle",
            on_change=_pin_selected,
            format_func=lambda option: format_label(option, lang),
        )
        version = version_of(label, options)
        note = st.session_state.get(_PIN_NOTE)
        if note is not None:
            st.warning(
                _(
                    "The link asks for model version '{version}', which this server does not have; showing "
                    "'{shown}' instead."
                ).format(version=quoted(note, MAX_QUOTED_CHARS), shown=escape_markdown(format_label(label)))
            )
        elif version is not None:
            st.query_params[PIN] = version
        path = options[label]
        if path is None:
            release = served_version()
            if release is None:  # the registry was emptied since `choices()`: nothing to describe
                return
            if isinstance(release.bundle, Bundle):
                _describe(release.bundle)
            elif isinstance(release.bundle, BaselineBundle):
                st.caption(
                    _("Version `{version}` · {kind} baseline (the named fallback)").format(
                        version=release.version, kind=release.kind
                    )
                )
            return
        try:
            bundle = load(path)
        except BundleError as err:
            st.error(_("This bundle cannot be used: {error}").format(error=escape_markdown(err)))
            return
        _describe(bundle)


def banner() -> None:
    """Above every page: a LAB_* setting the server could not use, and, while the registry's version is
    selected, a degraded service."""
    for problem in SETTING_PROBLEMS:
        shown = problem.shown() if isinstance(problem, SettingProblem) else problem
        st.warning(escape_markdown(shown))  # the message quotes the operator's value
    if st.session_state.get("lab_bundle", next(iter(choices()), None)) != RELEASED_LABEL:
        return
    release = served_version()
    if release is not None and release.degraded:
        st.warning(
            _("Serving {kind} version {version}: {reason}.").format(
                kind=release.kind or _("nothing"),
                version=escape_markdown(release.version or _("(none)")),
                reason=escape_markdown(release.reason),
            )
        )  # the reason quotes files of the registry


def selected_model() -> Bundle | BaselineBundle | None:
    """The selected model, which may be a baseline when the registry had to fall back to one."""
    options = choices()
    label = st.session_state.get("lab_bundle")
    label = label if label in options else next(iter(options), None)
    if label is None:
        return None
    path = options[label]
    if path is None:
        release = served_version()
        return None if release is None else release.bundle
    try:
        return load(path)
    except BundleError:
        return None


def selected_bundle() -> Bundle | None:
    """The selected transformer bundle (None when nothing usable, or when a baseline is served)."""
    model = selected_model()
    return model if isinstance(model, Bundle) else None


def _fallbacks() -> list[tuple[str, Bundle]]:
    """Transformers a page can show instead, in order: the registry's served one (current, else last
    known-good), then the shipped default."""
    found: list[tuple[str, Bundle]] = []
    release = served_version()
    if release is not None and isinstance(release.bundle, Bundle):
        name = (
            _("the registry's current version") if not release.degraded else _("the registry's last known-good version")
        )
        found.append((name, release.bundle))
    if SHIPPED_DIR.is_dir():
        try:
            found.append((_("the shipped default"), load(SHIPPED_DIR)))
        except BundleError:
            pass
    return found


def require_bundle() -> Bundle:
    """The selected transformer bundle; else a fallback with a banner saying why and what is shown; a message
    and a stop of this page's run only when no transformer loads at all."""
    model = selected_model()
    if isinstance(model, Bundle):
        return model
    why = (
        _("The registry is serving the {kind} baseline (its named fallback), which has no attention to show").format(
            kind=model.kind
        )
        if isinstance(model, BaselineBundle)
        else _("The selected model cannot be loaded")
    )
    for name, bundle in _fallbacks():
        st.warning(
            _("{why}; this page shows {name} instead (version `{version}`).").format(
                why=why, name=name, version=escape_markdown(bundle.version)
            )
        )
        return bundle
    st.info(_("This page needs a model. Pick a usable bundle in the sidebar, or train one on the Training page."))
    st.stop()
