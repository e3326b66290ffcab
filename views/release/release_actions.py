"""Promote and roll back through the registry for the Release page, and show what the action did.

The outcome (a message, the failed checks, the log line) is kept in the session, so it shows after the rerun that
closes the confirmation dialog. A refusal or an error is an outcome to show, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from core.model.bundle import Bundle
from core.model.bundle_checks import BundleError
from core.release.gate.rubric import ReleaseCheck
from core.release.registry.registry import promote, rollback
from core.release.registry.registry_log import read_log
from core.release.registry.served import RegistryError, read_current
from ui import models
from ui.text import escape_markdown
from views.release.rubric import EXACT

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
        said = str(err).replace(repr(str(bundle.path)), f"version {bundle.version}")  # never the server's path
        st.session_state[ACTION_KEY] = {
            "ok": False,
            "message": f"The promotion could not be done: {said}",
            "entry": None,
        }
        return
    refused = None if result.promoted else result.rubric
    failures = [c for c in refused.checks if not c.passed] if refused is not None else []
    if result.promoted:
        message = f"Promoted: {result.reason}."
    elif failures:
        message = (
            f"Refused: version {result.version} stays out of the registry, and current stays at "
            f"{result.current or 'none'}. The checks it failed:"
        )
    else:
        message = f"Refused, and current stays at {result.current or 'none'}: {result.reason}."
    st.session_state[ACTION_KEY] = {
        "ok": result.promoted,
        "message": message,
        "items": [c.name for c in failures],  # named in the box; their figures and rules one click away
        "figures": [f"{c.name}: {c.figure} (rule: {c.threshold}). {c.detail}" for c in failures],
        "entry": written_entry(reg, ("promote", "refuse"), result.version),
    }


def rollback_to(reg: Path, target: str, why: str) -> None:
    """Switch current back to `target`; keeps the outcome for `show_action`."""
    try:  # to=target: exactly the version the dialog named, even if another teacher moved `current` meanwhile
        result = rollback(reg, to=target, actor=models.session_id(), why=why, reason=why)
    except (RegistryError, BundleError, OSError) as err:
        st.session_state[ACTION_KEY] = {"ok": False, "message": f"The rollback could not be done: {err}", "entry": None}
        return
    message = f"Rolled back: {result.reason}." if result.switched else f"Rollback refused: {result.reason}."
    st.session_state[ACTION_KEY] = {
        "ok": result.switched,
        "message": message,
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
        f"The class is served version **{escape_markdown(now['version'])}** now."
        if now
        else "The registry serves no version yet."
    )


def show_action() -> None:
    """The outcome of this session's last promote or rollback, with the log entry it wrote."""
    action: dict[str, Any] | None = st.session_state.get(ACTION_KEY)
    if action:
        items = "".join(f"\n- {escape_markdown(item)}" for item in action.get("items", []))
        (st.success if action["ok"] else st.error)(escape_markdown(action["message"]) + items)
        if action.get("figures"):
            with st.expander(EXACT):
                for line in action["figures"]:
                    st.markdown(escape_markdown(line))
        if action["entry"] is not None:
            st.caption("The log entry it wrote:")
            st.json(action["entry"], expanded=True)
