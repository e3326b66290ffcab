"""The model registry as the Release page shows it: what is current and served, the versions, the log.

Reads only; promoting and rolling back stay on the page, behind the teacher's confirmation. Versions, reasons and
log entries come from the registry's files, so every markdown value is escaped and the tables are dataframes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.release.registry.registry_log import read_log
from core.release.registry.served import VersionInfo, list_versions, read_current, resolve_version
from ui import projector
from ui.text import escape_markdown


def show_status(reg: Path) -> None:
    """Three figures (current, served now, how many promoted), why this is served, and the versions table."""
    current = read_current(reg)
    versions = list_versions(reg, verify=True)
    served = resolve_version(reg)
    a, b, c = st.columns(3)
    # metric values are markdown: the pointer's version comes from a file
    a.metric("Current version", escape_markdown(current["version"]) if current else "none")
    b.metric(
        f"Served now ({escape_markdown(served.kind)})" if served.kind else "Served now",
        escape_markdown(served.version) if served.version else "nothing",
    )
    c.metric("Promoted versions", len(versions))
    why = escape_markdown(served.reason[:1].upper() + served.reason[1:])
    (st.warning if served.degraded and versions else st.caption)(why)
    if versions:
        history = current["history"] if current else []
        st.subheader("Versions (oldest promotion first)")
        projector.dataframe(pd.DataFrame(version_rows(versions, current)), hide_index=True, key="rel_versions_table")
        if history:
            st.caption(
                "Earlier currents, oldest first (a rollback returns to the last one): "
                + ", ".join(escape_markdown(h) for h in history)
            )


def version_rows(versions: list[VersionInfo], current: dict | None) -> list[dict]:
    """One row per promoted version with its role: current, earlier current (in the history) or promoted."""
    history = current["history"] if current else []
    return [
        {
            "version": v.version,
            "role": (
                "current"
                if current and v.version == current["version"]
                else "earlier current"
                if v.version in history
                else "promoted"
            ),
            "promoted": v.promoted,
            "loads and verifies": v.verifies,
            "problem": v.problem,
        }
        for v in versions
    ]


def show_log(reg: Path) -> None:
    """The append-only log, newest first, one row per promotion, refusal or rollback."""
    log = read_log(reg)
    st.subheader("The log, newest first")
    if not log:
        st.caption("Nothing has been promoted, refused or rolled back here yet.")
        return
    rows = [
        {
            "time": e.get("time"),
            "event": e.get("event"),
            "version": e.get("version"),
            "previous": e.get("previous"),
            "failed checks": ", ".join(map(str, e.get("failed") or [])),
            "reason": e.get("reason"),
            "why (teacher)": e.get("why"),
            "by (session)": e.get("actor"),
        }  # not its "source": a path on the server (`python -m core release status` shows it)
        for e in reversed(log)
    ]
    projector.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="rel_log_table",
        column_config={
            "reason": st.column_config.TextColumn(width="large"),
            "why (teacher)": st.column_config.TextColumn(width="medium"),
        },
    )
    st.caption(f"{len(log)} entries. The log is append-only: entries are never changed or removed.")
