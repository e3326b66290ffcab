"""Follow the teacher: a learner in a class session whose page and widgets follow the teacher's view.

Issue 29; being built.
"""

from __future__ import annotations


def sync(page_path: str) -> None:
    """Before the page runs: publish the teacher's view, or bring a following learner to it."""
