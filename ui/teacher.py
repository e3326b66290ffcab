"""Teacher-only actions: a passcode that the server's operator sets unlocks them for one browser session.

Promote and rollback change the model the whole class is served, so the Release page offers them only to
whoever knows the passcode. The operator sets it in the environment variable LAB_TEACHER_PASSCODE (or in
Streamlit secrets, `.streamlit/secrets.toml`); with none set, the actions are read-only. The passcode is
compared in constant time, never echoed, never put in the URL, and never kept: the input is cleared as
soon as it is checked, and the session keeps only the boolean "teacher unlocked".
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from typing import Any

import streamlit as st

from ui.text import escape_markdown

ENV_VAR = "LAB_TEACHER_PASSCODE"
# The longest passcode accepted, typed or configured (the input refuses more; so does the check, since the
# browser's limit can be bypassed).
MAX_PASSCODE_CHARS = 128
# The longest reason a teacher can give for a promotion or a rollback (it goes into the registry's log).
MAX_REASON_CHARS = 300

UNLOCKED_KEY = "teacher_unlocked"  # bool: the only trace the passcode leaves in a session
_INPUT_KEY = "teacher_passcode_input"  # the password field; emptied by the check before the page runs
_NOTE_KEY = "teacher_note"  # the last attempt's outcome, in words (never the passcode)
_CONFIRM_KEY = "teacher_confirmation"  # the confirmation a page has open (kept, so the dialog survives its reruns)

HOW_TO_ENABLE = (
    "To enable them, whoever starts the server sets a passcode before starting it and tells it only to the "
    "teachers: `LAB_TEACHER_PASSCODE='choose-a-passcode' make run` (or the line "
    '`LAB_TEACHER_PASSCODE = "choose-a-passcode"` in `.streamlit/secrets.toml`), then restarts the server.'
)


def configured_passcode(environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> str:
    """The teacher passcode the operator configured: LAB_TEACHER_PASSCODE from the environment first, then from
    Streamlit secrets; "" when neither is set (or only to blanks), meaning teacher actions are off.

    `environ` and `secrets` default to os.environ and st.secrets. A missing or unreadable secrets file is not an
    error: it only means no passcode comes from there. A TOML number is read as its digits.
    """
    environ = os.environ if environ is None else environ
    secrets = st.secrets if secrets is None else secrets
    value: Any = environ.get(ENV_VAR, "")
    if not value.strip():
        try:
            value = secrets.get(ENV_VAR, "")
        except (OSError, ValueError):  # StreamlitSecretNotFoundError (a FileNotFoundError), a bad TOML or file
            value = ""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return ""
    return value


def passcode_matches(typed: str, configured: str) -> bool:
    """True when `typed` is the configured passcode: compared in constant time on the UTF-8 bytes.

    An empty configured passcode matches nothing, and neither side may exceed MAX_PASSCODE_CHARS.
    """
    if not configured or not typed or len(typed) > MAX_PASSCODE_CHARS or len(configured) > MAX_PASSCODE_CHARS:
        return False
    return hmac.compare_digest(typed.encode("utf-8"), configured.encode("utf-8"))


def check_reason(text: str) -> str:
    """The reason a teacher typed, with its whitespace collapsed; ValueError saying what to type otherwise."""
    reason = " ".join(str(text).split())
    if not reason:
        raise ValueError("a reason is required: say in a few words why (it is written to the registry's log)")
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"the reason has {len(reason)} characters; keep it to {MAX_REASON_CHARS} or fewer")
    return reason


def unlocked() -> bool:
    """True when this browser session has given the right passcode and a passcode is still configured."""
    return bool(st.session_state.get(UNLOCKED_KEY)) and bool(configured_passcode())


def _try_unlock() -> None:
    """The Unlock button's callback: check the typed passcode, keep only the outcome, empty the field."""
    typed = st.session_state.get(_INPUT_KEY) or ""
    st.session_state[_INPUT_KEY] = ""  # the passcode leaves the session before the page runs
    configured = configured_passcode()
    if not typed:
        st.session_state[_NOTE_KEY] = "Type the teacher passcode first."
    elif len(typed) > MAX_PASSCODE_CHARS:
        st.session_state[_NOTE_KEY] = (
            f"Refused: a passcode has at most {MAX_PASSCODE_CHARS} characters. The actions stay locked."
        )
    elif passcode_matches(typed, configured):
        st.session_state[UNLOCKED_KEY] = True
        st.session_state.pop(_NOTE_KEY, None)
        return
    else:
        st.session_state[_NOTE_KEY] = (
            "Refused: that is not the teacher passcode. The actions stay locked; ask whoever runs the server for it."
        )
    st.session_state[UNLOCKED_KEY] = False


def _lock() -> None:
    st.session_state[UNLOCKED_KEY] = False
    st.session_state.pop(_NOTE_KEY, None)


def gate(what: str, why: str = "change what the whole class is served") -> bool:
    """The teacher gate above teacher-only actions (`what` names them and `why` says why they are the teacher's,
    for the messages): the how-to when no passcode is configured, the passcode form while locked, a Lock button
    once unlocked. True when unlocked."""
    configured = configured_passcode()
    if not configured:
        st.info(
            f"**Read-only: no teacher passcode is configured on this server**, so {what} are off for "
            f"everyone. {HOW_TO_ENABLE}"
        )
        return False
    if len(configured) > MAX_PASSCODE_CHARS:
        st.warning(
            f"The configured {ENV_VAR} is longer than {MAX_PASSCODE_CHARS} characters, so no one can type "
            f"it: {what} stay read-only. Set a shorter passcode and restart the server."
        )
        return False
    if unlocked():
        st.success(
            f"Teacher mode: {what} are unlocked for this browser session only. Lock them before you leave "
            "this computer (reloading or closing the tab locks them too)."
        )
        st.button("Lock the teacher actions", key="teacher_lock", on_click=_lock)
        return True
    st.markdown(
        f"**Teacher only.** {what[:1].upper() + what[1:]} {why}, so they "
        "need the teacher passcode that whoever runs the server has set. It unlocks them for this browser "
        "session only and is never shown or stored."
    )
    with st.form("teacher_unlock_form", clear_on_submit=True, border=False):
        st.text_input(
            "Teacher passcode",
            key=_INPUT_KEY,
            type="password",
            max_chars=MAX_PASSCODE_CHARS,
            autocomplete="off",
            placeholder="the passcode set on the server",
        )
        st.form_submit_button("Unlock", key="teacher_unlock", on_click=_try_unlock)
    note = st.session_state.get(_NOTE_KEY)
    if note:
        st.error(note)
    return False


# ---- confirmations -------------------------------------------------------------------------------
# A page opens a confirmation with a button (open_confirmation), then on every run shows the st.dialog of
# confirmation() while it is not None; the dialog's body is confirm(). The open one is kept in the session,
# so the dialog survives the reruns its own widgets cause, and AppTest can press its buttons.


def open_confirmation(what: Any) -> None:
    st.session_state[_CONFIRM_KEY] = what


def close_confirmation() -> None:
    st.session_state.pop(_CONFIRM_KEY, None)


def confirmation() -> Any:
    """The confirmation the page opened, while this session is unlocked; None (and closed) otherwise."""
    if not unlocked():
        close_confirmation()
    return st.session_state.get(_CONFIRM_KEY)


def confirm(summary: str, action: str, key: str) -> str | None:
    """A confirmation's body (inside the page's st.dialog): `summary` (markdown: what the class will be served),
    a required reason, the `action` button and Cancel; widget keys `key`_why, `key`_confirm, `key`_cancel.

    Returns the checked reason once `action` is pressed with a usable one by an unlocked session; a problem is
    said in the dialog, and Cancel closes it."""
    st.markdown(f"{summary} This is written to the registry's log with this browser session's id and your reason.")
    typed = st.text_input(
        f"Why (required, at most {MAX_REASON_CHARS} characters; written to the log)",
        key=f"{key}_why",
        max_chars=MAX_REASON_CHARS,
        placeholder="for example: users report bad suggestions",
    )
    ok, cancel = st.columns(2)
    confirmed = ok.button(action, key=f"{key}_confirm", type="primary")
    if cancel.button("Cancel", key=f"{key}_cancel"):
        close_confirmation()
        st.rerun()
    if not confirmed or not unlocked():  # the passcode may have been removed since the dialog opened
        return None
    try:
        return check_reason(typed)
    except ValueError as err:
        st.warning(f"Not done: {escape_markdown(err)}.")
        return None
