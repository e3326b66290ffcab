"""Promote and roll back through the registry for the Release page, and show what the action did.

The outcome (what happened, the failed checks, the log line) is kept in the session, so it shows after the rerun
that closes the confirmation dialog; its sentence is composed when it is shown, in the reader's language then. A
refusal or an error is an outcome to show, never a traceback. The registry's reasons and errors are core's words
(English, as the log file and the command line keep them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from core.i18n import _
from core.model.bundle import Bundle
from core.model.bundle_checks import BundleError
from core.release.gate.rubric import ReleaseCheck
from core.release.registry.registry import promote, rollback
from core.release.registry.registry_log import read_log
from core.release.registry.served import RegistryError, read_current
from ui import models
from ui.text import escape_markdown
from views.release.rubric import EXACT, failed_check
from views.release.wording import known

ACTION_KEY = "rel_done_action"  # session state: the outcome of the last promote or rollback
SERVER_ONLY = ("source",)  # log fields that hold a server path: `python -m core release status` shows them, a page not


def written_entry(reg: Path, events: tuple[str, ...], version: str | None) -> dict | None:
    """The newest log entry of one of `events` for `version`: the one the action just appended, as the page shows
    it (without the fields that hold a server path)."""
    entry = next((e for e in reversed(read_log(reg)) if e.get("event") in events and e.get("version") == version), None)
    return None if entry is None else {k: v for k, v in entry.items() if k not in SERVER_ONLY}


def promote_version(bundle: Bundle, check: ReleaseCheck, reg: Path, why: str) -> None:
    """Promote `bundle` with its release check; keeps the outcome (promoted, refused with the failed checks,
    or could not be done) for `show_action`."""
    try:
        result = promote(bundle.path, reg, check=check, actor=models.session_id(), why=why)
    except (RegistryError, BundleError, OSError) as err:
        # never the server's path: the bundle is named by its version (core's error is English, as it says it)
        said = str(err).replace(repr(str(bundle.path)), f"version {bundle.version}")
        st.session_state[ACTION_KEY] = {"ok": False, "said": "promote_failed", "error": said, "entry": None}
        return
    refused = None if result.promoted else result.rubric
    failures = [c for c in refused.checks if not c.passed] if refused is not None else []
    said = "promoted" if result.promoted else "refused_checks" if failures else "refused"
    st.session_state[ACTION_KEY] = {
        "ok": result.promoted,
        "said": said,
        "version": result.version,
        "current": result.current,
        "reason": result.reason,
        "items": [c.name for c in failures],  # named in the box; their figures and rules one click away
        "failed": failures,
        "entry": written_entry(reg, ("promote", "refuse"), result.version),
    }


def rollback_to(reg: Path, target: str, why: str) -> None:
    """Switch current back to `target`; keeps the outcome for `show_action`."""
    try:  # to=target: exactly the version the dialog named, even if another teacher moved `current` meanwhile
        result = rollback(reg, to=target, actor=models.session_id(), why=why, reason=why)
    except (RegistryError, BundleError, OSError) as err:
        st.session_state[ACTION_KEY] = {"ok": False, "said": "rollback_failed", "error": str(err), "entry": None}
        return
    st.session_state[ACTION_KEY] = {
        "ok": result.switched,
        "said": "rolled_back" if result.switched else "rollback_refused",
        "reason": result.reason,
        "entry": written_entry(reg, ("rollback", "rollback-refused"), result.version),
    }


def previous_version(reg: Path) -> str | None:
    """The version a rollback returns to: the last earlier current, or None."""
    current = read_current(reg)
    return current["history"][-1] if current and current["history"] else None


def served_now(reg: Path) -> str:
    """One sentence naming the version the class is served now (markdown, the version escaped)."""
    now = read_current(reg)
    return (
        _("The class is served version **{version}** now.").format(version=escape_markdown(now["version"]))
        if now
        else _("The registry serves no version yet.")
    )


def message(action: dict[str, Any]) -> str:
    """The outcome's sentence in the reader's language (plain text: the caller escapes it)."""
    said, reason, error = action.get("said"), action.get("reason"), action.get("error")
    current = action.get("current") or _("none")
    if said == "promote_failed":
        return _("The promotion could not be done: {error}").format(error=error)
    if said == "promoted":
        return _("Promoted: {reason}.").format(reason=reason)
    if said == "refused_checks":
        return _(
            "Refused: version {version} stays out of the registry, and current stays at {current}. The checks it "
            "failed:"
        ).format(version=action.get("version"), current=current)
    if said == "refused":
        return _("Refused, and current stays at {current}: {reason}.").format(current=current, reason=reason)
    if said == "rollback_failed":
        return _("The rollback could not be done: {error}").format(error=error)
    if said == "rolled_back":
        return _("Rolled back: {reason}.").format(reason=reason)
    return _("Rollback refused: {reason}.").format(reason=reason)


def show_action() -> None:
    """The outcome of this session's last promote or rollback, with the log entry it wrote."""
    action: dict[str, Any] | None = st.session_state.get(ACTION_KEY)
    if action:
        items = "".join(f"\n- {escape_markdown(known(item))}" for item in action.get("items", []))
        (st.success if action["ok"] else st.error)(escape_markdown(message(action)) + items)
        if action.get("failed"):
            with st.expander(_(EXACT)):
                for check in action["failed"]:
                    st.markdown(escape_markdown(failed_check(check)))
        if action["entry"] is not None:
            st.caption(_("The log entry it wrote:"))
            st.json(action["entry"], expanded=True)
