"""A live class session in the sidebar: the teacher opens one, learners join with its code and a display name.

Issue 29; being built. Without a session the lab works as before.
"""

from __future__ import annotations


def sidebar() -> None:
    """The sidebar's class-session section (joined, or a form to join; the teacher's open/close)."""
