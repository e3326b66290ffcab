"""A live class session in the sidebar: the teacher opens one, learners join with its code and a display name.

Issue 29; being built. Without a session the lab works as before.

The session keeps only what this browser needs to find its place in the class database (core.classroom.live):
a learner's (code, learner id, display name), or the teacher's open session code. `current()` and
`teacher_session()` read them for ui.predict and ui.follow.
"""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from ui import teacher

LEARNER_KEY = "live_class_learner"  # (code, learner id, display name) of the session this browser joined
TEACHER_KEY = "live_class_teacher"  # the code of the session this (unlocked) teacher opened


class Learner(NamedTuple):
    code: str
    learner: str
    name: str


def current() -> Learner | None:
    """The learner's place in a class session (code, learner id, display name), or None when not in one."""
    stored = st.session_state.get(LEARNER_KEY)
    if isinstance(stored, tuple) and len(stored) == 3 and all(isinstance(s, str) for s in stored):
        return Learner(*stored)
    return None


def teacher_session() -> str | None:
    """The code of the session this teacher opened (while the teacher actions are unlocked), or None."""
    code = st.session_state.get(TEACHER_KEY)
    return code if isinstance(code, str) and teacher.unlocked() else None


def sidebar() -> None:
    """The sidebar's class-session section (joined, or a form to join; the teacher's open/close)."""
