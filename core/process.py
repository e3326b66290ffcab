"""A child process in a process group of its own, on POSIX and on Windows: written once, here.

A training run and the class server's workers and proxy each start in their own group, so Ctrl-C in a terminal or
the death of their parent does not reach them, and one signal to the group stops a child with everything it
started. POSIX: a new session (setsid); Windows has no sessions: a new process group (CTRL_BREAK_EVENT then
reaches the group alone).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def own_group() -> dict[str, Any]:
    """subprocess.Popen's keyword arguments that start the child in a process group of its own."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}
