"""The model registry as the Release page shows it: what is current and served, the versions, the log.

Reads only; promoting and rolling back stay on the page, behind the teacher's confirmation. Versions, reasons and
log entries come from the registry's files, so every markdown value is escaped and the tables are dataframes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.i18n import N_, _
from core.release.registry.registry_log import read_log
from core.release.registry.served import VersionInfo, list_versions, read_current, resolve_version
from ui import projector
from ui.text import escape_markdown
from views.release.wording import known

ROLES = (N_("current"), N_("earlier current"), N_("promoted"))  # a version's role, shown translated


def show_status(reg: Path) -> None:
    """Three figures (current, served now, how many promoted), why this is served, and the versions table."""
    current = read_current(reg)
    versions = list_versions(reg, verify=True)
    served = resolve_version(reg)
    a, b, c = st.columns(3)
    # metric values are markdown: the pointer's version comes from a file
    a.metric(_("Current version"), escape_markdown(current["version"]) if current else _("none"))
    b.metric(
        _("Served now ({kind})").format(kind=escape_markdown(known(served.kind))) if served.kind else _("Served now"),
        escape_markdown(served.version) if served.version else _("nothing"),
    )
    c.metric(_("Promoted versions"), len(versions))
    # core's reason (English: the registry's own words, as the command line and the app's banner say them)
    why = escape_markdown(served.reason[:1].upper() + served.reason[1:])
    (st.warning if served.degraded and versions else st.caption)(why)
    if versions:
        history = current["history"] if current else []
        st.subheader(_("Versions (oldest promotion first)"))
        projector.dataframe(pd.DataFrame(version_rows(versions, current)), hide_index=True, key="rel_versions_table")
        if history:
            st.caption(
                _("Earlier currents, oldest first (a rollback returns to the last one): {versions}").format(
                    versions=", ".join(escape_markdown(h) for h in history)
                )
            )


def version_rows(versions: list[VersionInfo], current: dict | None) -> list[dict]:
    """One row per promoted version with its role: current, earlier current (in the history) or promoted
    (headers and roles in the reader's language)."""
    history = current["history"] if current else []
    current_role, earlier_role, promoted_role = ROLES
    return [
        {
            _("version"): v.version,
            _("role"): _(
                current_role
                if current and v.version == current["version"]
                else earlier_role
                if v.version in history
                else promoted_role
            ),
            _("promoted"): v.promoted,
            _("loads and verifies"): v.verifies,
            _("problem"): v.problem,
        }
        for v in versions
    ]


def show_log(reg: Path) -> None:
    """The append-only log, newest first, one row per promotion, refusal or rollback."""
    log = read_log(reg)
    st.subheader(_("The log, newest first"))
    if not log:
        st.caption(_("Nothing has been promoted, refused or rolled back here yet."))
        return
    reason, why = _("reason"), _("why (teacher)")
    rows = [
        {
            _("time"): e.get("time"),
            _("event"): known(e.get("event")),
            _("version"): e.get("version"),
            _("previous"): e.get("previous"),
            _("failed checks"): ", ".join(str(known(str(name))) for name in e.get("failed") or []),
            reason: e.get("reason"),  # the registry's words, as the log file keeps them
            why: e.get("why"),
            _("by (session)"): e.get("actor"),
        }  # not its "source": a path on the server (`python -m core release status` shows it)
        for e in reversed(log)
    ]
    projector.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="rel_log_table",
        column_config={
            reason: st.column_config.TextColumn(width="large"),
            why: st.column_config.TextColumn(width="medium"),
        },
    )
    st.caption(
        _("{entries} entries. The log is append-only: entries are never changed or removed.").format(
            entries=str(len(log))
        )
    )
