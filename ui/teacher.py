"""Teacher-only actions: a passcode that the server's operator sets unlocks them for one browser session.

Promote and rollback change what the whole class is served. The passcode is compared in constant time, never echoed,
put in the URL or kept. Guessing is throttled as OWASP's authentication guidance asks, per session (FREE_TRIES wrong
ones in a row answered at once, then waits of 1, 2, 4 ... s, then SESSION_LIMIT lock that session out for LOCKOUT_S)
and per server (SERVER_FREE guesses, one back every SERVER_INTERVAL_S: in t seconds at most SERVER_FREE + t /
SERVER_INTERVAL_S wrong passcodes are compared), never so that others' guesses lock the teacher out (a lockout of
everyone once stayed shut for a lesson). Each attempt is one critical section across workers under a file lock, and
it never fails open: without the lock or the record nothing is compared.
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st
from filelock import FileLock, Timeout

from core import i18n
from core.classroom.store import class_db_path
from core.files import write_json_atomic
from core.i18n import N_, _
from core.jsonfile import JsonFileError, read_json_file
from core.settings import PASSCODE_ENV, teacher_passcode
from ui.text import escape_markdown

# The longest passcode accepted, typed or configured (the input refuses more; so does the check, since the
# browser's limit can be bypassed).
MAX_PASSCODE_CHARS = 128
# The longest reason a teacher can give for a promotion or a rollback (it goes into the registry's log).
MAX_REASON_CHARS = 300

ATTEMPTS_ENV = "LAB_TEACHER_ATTEMPTS"
ATTEMPTS_FILE = "teacher_attempts.json"
FREE_TRIES = 3  # wrong passcodes in a row a session types with no wait: a teacher's typos
MAX_DELAY_S = 60  # the longest wait between two attempts of a session short of its lockout
SESSION_LIMIT = 5  # wrong passcodes in a row that lock a session out
WINDOW_S = 600.0  # a session's wrong passcodes older than this no longer count
LOCKOUT_S = 300.0  # a session's lockout
SERVER_FREE = 10  # the server's guesses: wrong passcodes it compares at once, from every session together
SERVER_INTERVAL_S = 60.0  # then one guess comes back per interval: the longest the teacher waits once guessing stops
LOCK_TIMEOUT_S = 5.0  # how long an attempt waits for the others' (each holds the lock for a read, a write, a compare)
MAX_ATTEMPTS_BYTES = 4096  # the record is two numbers: a few dozen bytes

clock: Callable[[], float] = time.time
log = logging.getLogger(__name__)

UNLOCKED_KEY = "teacher_unlocked"  # bool: the only trace the passcode leaves in a session
_INPUT_KEY = "teacher_passcode_input"  # the password field; emptied by the check before the page runs
_NOTE_KEY = "teacher_note"  # the last attempt's outcome, in words (never the passcode)
_FAILURES_KEY = "teacher_failures"  # the times of this session's wrong passcodes in a row (never the guesses)
_CONFIRM_KEY = "teacher_confirmation"  # the confirmation a page has open (kept, so the dialog survives its reruns)

HOW_TO_ENABLE = N_(
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
    return teacher_passcode(environ, st.secrets if secrets is None else secrets)


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
        raise ValueError(_("a reason is required: say in a few words why (it is written to the registry's log)"))
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(
            _("the reason has {count} characters; keep it to {most} or fewer").format(
                count=len(reason), most=MAX_REASON_CHARS
            )
        )
    return reason


def unlocked() -> bool:
    """True when this browser session has given the right passcode and a passcode is still configured."""
    return bool(st.session_state.get(UNLOCKED_KEY)) and bool(configured_passcode())


def _try_unlock(input_key: str = _INPUT_KEY) -> None:
    """The Unlock button's callback: refuse while this session waits or is locked out, else make one attempt on the
    server's record (AttemptsRecord.attempt), which compares the passcode typed into `input_key` only if a guess is
    left; keep only the outcome, empty the field."""
    typed = st.session_state.get(input_key) or ""
    st.session_state[input_key] = ""  # the passcode leaves the session before the page runs
    st.session_state[UNLOCKED_KEY] = False
    if not typed:
        st.session_state[_NOTE_KEY] = _("Type the teacher passcode first.")
        return
    now = float(clock())
    wait = session_wait(_session_failures(now), now)
    if wait > 0:
        log.info("teacher passcode attempt refused unchecked: this session waits %.0f s more", wait)
        st.session_state[_NOTE_KEY] = too_many(wait)
        return
    if len(typed) > MAX_PASSCODE_CHARS:
        st.session_state[_NOTE_KEY] = _(
            "Refused: a passcode has at most {count} characters. The actions stay locked."
        ).format(count=MAX_PASSCODE_CHARS)
        return
    try:
        outcome = AttemptsRecord(attempts_path()).attempt(lambda: passcode_matches(typed, configured_passcode()))
    except AttemptsUnavailable as e:
        log.error("teacher passcode attempt refused unchecked: %s", e)
        st.session_state[_NOTE_KEY] = _(
            "The passcode cannot be checked right now (the server could not record the attempt; its log says why), "
            "so it was not compared and the actions stay locked. Try again in a moment."
        )
        return
    if outcome.matched is None:
        log.info("teacher passcode attempt refused unchecked: the server compares the next in %.0f s", outcome.wait)
        st.session_state[_NOTE_KEY] = too_many(outcome.wait)
    elif outcome.matched:
        st.session_state[UNLOCKED_KEY] = True
        st.session_state.pop(_NOTE_KEY, None)
        st.session_state.pop(_FAILURES_KEY, None)
    else:
        st.session_state[_NOTE_KEY] = _(
            "Refused: that is not the teacher passcode. The actions stay locked; ask whoever runs the server for it."
        )
        now = outcome.at
        session = [*_session_failures(now), now][-SESSION_LIMIT:]
        st.session_state[_FAILURES_KEY] = session
        wait = max(session_wait(session, now), outcome.wait)
        log.warning(
            "wrong teacher passcode: %d in a row in this session; the server has %d of its %d guesses left%s",
            len(session),
            int(outcome.left),
            SERVER_FREE,
            f"; the next attempt waits {wait:.0f} s" if wait else "",
        )
        if wait > 0:
            st.session_state[_NOTE_KEY] += " " + too_many(wait)


def too_many(wait: float) -> str:
    """What a refused or delayed attempt is told: how long, never whether a guess was close."""
    return _("Too many wrong passcodes: try again in {seconds} s.").format(seconds=math.ceil(wait))


def _lock() -> None:
    st.session_state[UNLOCKED_KEY] = False
    st.session_state.pop(_NOTE_KEY, None)


def gate(what: str, why: str | None = None, *, key: str = "teacher") -> bool:
    """The teacher gate above teacher-only actions (`what` names them and `why` says why they are the teacher's,
    for the messages): the how-to when no passcode is configured, the passcode form while locked, a Lock button
    once unlocked. True when unlocked.

    Both come translated (`_()`): `what` a plural noun phrase, the subject of `why`, a verb phrase agreeing with it
    ("the class results" "name every learner and their answers"); `why` defaults to changing what the class is served.

    `key` prefixes the gate's widget keys: the sidebar's class session shows a gate on the same run
    as a page's own."""
    if why is None:
        why = _("change what the whole class is served")
    configured = configured_passcode()
    if not configured:
        st.info(
            _(
                "**Read-only: no teacher passcode is configured on this server**, so {what} are off for everyone."
            ).format(what=what)
            + " "
            + i18n._(HOW_TO_ENABLE)
        )
        return False
    if len(configured) > MAX_PASSCODE_CHARS:
        st.warning(
            _(
                "The configured {setting} is longer than {count} characters, so no one can type it: {what} stay "
                "read-only. Set a shorter passcode and restart the server."
            ).format(setting=PASSCODE_ENV, count=MAX_PASSCODE_CHARS, what=what)
        )
        return False
    if unlocked():
        st.success(
            _(
                "Teacher mode: {what} are unlocked for this browser session only. Lock them before you leave "
                "this computer (reloading or closing the tab locks them too)."
            ).format(what=what)
        )
        st.button(_("Lock the teacher actions"), key=f"{key}_lock", on_click=_lock)
        return True
    st.markdown(
        _(
            "**Teacher only.** {What} {why}, so they need the teacher passcode that whoever runs the server has set. "
            "It unlocks them for this browser session only and is never shown or stored."
        ).format(What=what[:1].upper() + what[1:], why=why)
    )
    input_key = f"{key}_passcode_input"  # "teacher_passcode_input" (_INPUT_KEY) for the pages' gate
    with st.form(f"{key}_unlock_form", clear_on_submit=True, border=False):
        st.text_input(
            _("Teacher passcode"),
            key=input_key,
            type="password",
            max_chars=MAX_PASSCODE_CHARS,
            autocomplete="off",
            placeholder=_("the passcode set on the server"),
        )
        st.form_submit_button(_("Unlock"), key=f"{key}_unlock", on_click=_try_unlock, args=(input_key,))
    note = st.session_state.get(_NOTE_KEY)
    if note:
        st.error(note)
    return False


# ---- slowing down guesses -------------------------------------------------------------------------


class AttemptsUnavailable(Exception):
    """The server's record of wrong passcodes cannot be read or written: no passcode is checked then."""


def attempts_path(environ: Mapping[str, str] | None = None) -> Path:
    """LAB_TEACHER_ATTEMPTS, else teacher_attempts.json in the class database's folder (LAB_CLASS_DB)."""
    raw = (os.environ if environ is None else environ).get(ATTEMPTS_ENV, "").strip()
    return Path(raw) if raw else class_db_path().parent / ATTEMPTS_FILE


def session_wait(failures: Sequence[float], now: float) -> float:
    """Seconds before this session's next passcode may be compared (0: now), from the times of its wrong passcodes
    in a row (see the module docstring for the rule)."""
    recent = sorted(t for t in failures if _recent(t, now))
    if len(recent) >= SESSION_LIMIT:
        until = recent[-1] + LOCKOUT_S
    elif len(recent) > FREE_TRIES:
        until = recent[-1] + min(MAX_DELAY_S, 2.0 ** (len(recent) - FREE_TRIES - 1))
    else:
        until = 0.0
    return max(0.0, until - now)


def guesses_left(left: float, at: float, now: float) -> float:
    """The server's guesses at `now`, from `left` at time `at`: one back per SERVER_INTERVAL_S, at most SERVER_FREE.
    A record from the future (the clock was set back) gives none back until now, and is rewritten at `now`."""
    return min(float(SERVER_FREE), max(0.0, left) + max(0.0, now - at) / SERVER_INTERVAL_S)


def server_wait(left: float) -> float:
    """Seconds until the server has a whole guess again (0: it has one now)."""
    return max(0.0, 1.0 - left) * SERVER_INTERVAL_S


def _session_failures(now: float) -> list[float]:
    times = st.session_state.get(_FAILURES_KEY)
    return [t for t in times if isinstance(t, float) and _recent(t, now)] if isinstance(times, list) else []


def _recent(t: float, now: float) -> bool:
    """Within WINDOW_S of `now`. A time slightly ahead counts too: the session's worker may have read the clock a
    moment before the record's lock gave it the time of its attempt."""
    return now - WINDOW_S < t < now + WINDOW_S


@dataclass(frozen=True)
class Attempt:
    """One attempt's outcome on the server's record: `matched` None when it was refused uncompared (no guess left),
    `left` the server's guesses afterwards, `wait` the seconds until it has one again, `at` the attempt's time."""

    matched: bool | None
    left: float
    wait: float
    at: float


class AttemptsRecord:
    """The server's guesses, {"left": how many, "at": when}, in a JSON file that every worker process of the machine
    reads and rewrites (atomically) only under a file lock beside it."""

    def __init__(self, path: Path):
        self.path = path

    def attempt(self, compare: Callable[[], bool]) -> Attempt:
        """One attempt, as one critical section across workers and threads: under the lock, read the guesses left at
        now; with no whole one, refuse without calling `compare` and without writing; else write one spent, call
        `compare` and, if it matched, write it back. AttemptsUnavailable, and `compare` not called, when the lock is
        not had within LOCK_TIMEOUT_S or the record cannot be read or written: a guess that could not be counted is
        never compared."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_S):
                now = float(clock())  # read under the lock: every worker's attempts are in the clock's order
                left = guesses_left(*self.read(), now)
                if left < 1.0:
                    return Attempt(None, left, server_wait(left), now)
                self._write(left - 1.0, now)
                if not compare():
                    return Attempt(False, left - 1.0, server_wait(left - 1.0), now)
                try:
                    self._write(left, now)
                except OSError as e:  # the right passcode was given; the guess stays spent, which fails closed
                    log.warning("teacher passcode: a right passcode's guess could not be given back: %s", e)
                return Attempt(True, left, 0.0, now)
        except Timeout:
            raise AttemptsUnavailable(
                f"{self.path} stayed locked by other attempts for over {LOCK_TIMEOUT_S:g} s"
            ) from None
        except OSError as e:
            raise AttemptsUnavailable(
                f"{self.path} cannot be read or written ({type(e).__name__}); check {ATTEMPTS_ENV}"
            ) from None

    def read(self) -> tuple[float, float]:
        """(guesses left, at when) as recorded; no record is a full one. A damaged record counts as full (only the
        server writes it, and the next wrong passcode rewrites it) and is logged; one that cannot be read raises
        OSError."""
        try:
            data = read_json_file(self.path, str(self.path), max_bytes=MAX_ATTEMPTS_BYTES)
        except FileNotFoundError:
            return float(SERVER_FREE), 0.0
        except JsonFileError as e:
            log.warning("teacher passcode: the attempts record is damaged and counts as unused: %s", e)
            return float(SERVER_FREE), 0.0
        fields = (data.get("left"), data.get("at")) if isinstance(data, dict) else ()
        numbers = [float(x) for x in fields if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if len(numbers) != 2:
            log.warning("teacher passcode: the attempts record %s holds no guesses and counts as unused", self.path)
            return float(SERVER_FREE), 0.0
        left, at = numbers
        return min(float(SERVER_FREE), left), at

    def _write(self, left: float, at: float) -> None:
        write_json_atomic(self.path, {"left": left, "at": at})


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
    st.markdown(
        summary + " " + _("This is written to the registry's log with this browser session's id and your reason.")
    )
    typed = st.text_input(
        _("Why (required, at most {count} characters; written to the log)").format(count=MAX_REASON_CHARS),
        key=f"{key}_why",
        max_chars=MAX_REASON_CHARS,
        placeholder=_("for example: users report bad suggestions"),
    )
    ok, cancel = st.columns(2)
    confirmed = ok.button(action, key=f"{key}_confirm", type="primary")
    if cancel.button(_("Cancel"), key=f"{key}_cancel"):
        close_confirmation()
        st.rerun()
    if not confirmed or not unlocked():  # the passcode may have been removed since the dialog opened
        return None
    try:
        return check_reason(typed)
    except ValueError as err:
        st.warning(_("Not done: {problem}.").format(problem=escape_markdown(err)))
        return None
