"""`release status`: the current version and its history, every version verified, what is served and why,
the log's latest entries and the leftovers of interrupted promotions. Reads only; a folder that is not a registry
the lab made is a RegistryError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from core.release.registry.leftovers import Leftover, find_leftovers
from core.release.registry.registry_log import read_log
from core.release.registry.served import (
    ServedVersion,
    VersionInfo,
    check_registry,
    list_versions,
    read_current,
    resolve_version,
)


@dataclass(frozen=True)
class RegistryStatus:
    registry: str
    current: str | None
    history: tuple[str, ...]
    versions: tuple[VersionInfo, ...]  # oldest promotion first
    served: ServedVersion
    log: tuple[dict, ...]  # the latest entries, oldest first
    leftovers: tuple[Leftover, ...] = ()  # of interrupted promotions; the next promote or rollback removes them

    def to_dict(self) -> dict:
        return {
            "registry": self.registry,
            "current": self.current,
            "history": list(self.history),
            "versions": [v.__dict__ for v in self.versions],
            "served": self.served.to_dict(),
            "log": list(self.log),
            "leftovers": [v.__dict__ for v in self.leftovers],
        }


def status(registry: str | os.PathLike = "registry", *, log_tail: int = 10) -> RegistryStatus:
    """The current version and its history, every version (verified), what is served, the log's tail, leftovers."""
    reg = Path(registry)
    check_registry(reg)  # /proc is not a registry: refused at once (RegistryError)
    current = read_current(reg)
    return RegistryStatus(
        str(reg),
        current["version"] if current else None,
        tuple(current["history"]) if current else (),
        tuple(list_versions(reg, verify=True)),
        resolve_version(reg),
        tuple(read_log(reg)[-log_tail:] if log_tail else ()),
        tuple(find_leftovers(reg)),
    )
