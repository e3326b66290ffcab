"""The Release page in a real browser, on a server whose operator set LAB_TEACHER_PASSCODE (conftest): promote
and rollback refuse without the passcode (disabled buttons, a wrong passcode refused, nothing written to the
registry), and the right one opens the confirmation dialog that names the version the class would be served.
Screenshots of the locked and the unlocked page are kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import expect

from .conftest import (
    ROOT,
    TEACHER_PASSCODE,
    open_page,
    outside_requests,
    save_screenshot,
    wait_for_app_idle,
    when_idle,
)

SHIPPED_VERSION = json.loads((ROOT / "models" / "default" / "manifest.json").read_text())["version"]


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def registry_state(server) -> dict[str, bytes]:
    """Every file of the server's registry (conftest: LAB_REGISTRY_DIR beside the server log), byte for byte."""
    reg = Path(server.log_path).parent / "registry"
    return (
        {str(p.relative_to(reg)): p.read_bytes() for p in sorted(reg.rglob("*")) if p.is_file()} if reg.is_dir() else {}
    )


def submit_passcode(page, passcode: str) -> None:
    when_idle(page, page.get_by_label("Teacher passcode")).fill(passcode)
    when_idle(page, page.get_by_role("button", name="Unlock", exact=True)).click()
    wait_for_app_idle(page)


def test_release_actions_refuse_without_the_passcode_and_the_right_one_opens_the_confirmation(
    page, base_url, server, tmp_path, requests_seen
):
    before = registry_state(server)
    open_page(page, base_url, "/release")
    # the actions are one click from the picture
    when_idle(page, page.get_by_role("tab", name="Promote or roll back")).click()
    promote = page.get_by_role("button", name=re.compile(r"^Promote version"))
    rollback = page.get_by_role("button", name=re.compile(r"^Roll back to"))
    expect(promote).to_have_count(1)
    assert SHIPPED_VERSION in promote.inner_text()  # the sidebar's default: the shipped bundle
    expect(promote).to_be_disabled()
    expect(rollback).to_be_disabled()
    field = page.get_by_label("Teacher passcode")
    assert field.get_attribute("type") == "password"  # typed characters are never shown

    submit_passcode(page, TEACHER_PASSCODE + "-wrong")
    expect(page.get_by_text("Refused: that is not the teacher passcode")).to_be_visible()
    expect(promote).to_be_disabled()
    expect(rollback).to_be_disabled()
    assert page.get_by_label("Teacher passcode").input_value() == ""  # the field is emptied after each check
    promote.click(force=True)  # a click on the disabled button does nothing either
    wait_for_app_idle(page)
    expect(page.get_by_role("dialog")).to_have_count(0)
    assert registry_state(server) == before
    save_screenshot(page, tmp_path, "release-locked")

    submit_passcode(page, TEACHER_PASSCODE)
    expect(page.get_by_text("unlocked for this browser session only")).to_be_visible()
    expect(promote).to_be_enabled()
    expect(rollback).to_be_disabled()  # nothing was ever promoted on this server: nothing to return to
    save_screenshot(page, tmp_path, "release-unlocked")
    when_idle(page, promote).click()
    dialog = page.get_by_role("dialog")
    # The dialog streams in: it is visible before its reason field is drawn, so wait for the text
    # (expect retries) rather than read it once (the read raced the field on CI).
    expect(dialog).to_contain_text(f"the whole class is served version {SHIPPED_VERSION} from now on")
    expect(dialog.get_by_label(re.compile(r"^Why \(required"))).to_be_visible()
    save_screenshot(page, tmp_path, "release-confirm-dialog")
    dialog.get_by_role("button", name=f"Promote version {SHIPPED_VERSION}").click()  # no reason: refused
    expect(dialog.get_by_text("a reason is required")).to_be_visible()
    dialog.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    wait_for_app_idle(page)
    assert registry_state(server) == before  # neither the refusal nor the cancel wrote anything

    for seen in (page.content(), page.url, main_text(page)):
        assert TEACHER_PASSCODE not in seen
    assert outside_requests(requests_seen) == []
