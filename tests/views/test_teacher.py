"""ui.teacher: where the configured passcode comes from (the environment first, then Streamlit secrets; a missing
or broken secrets file is not an error), how a typed one is compared (constant time, bounded), and the reason
a teacher must give."""

import hmac
import os

import pytest
from streamlit import config
from streamlit.runtime.secrets import Secrets

from core.settings import PASSCODE_ENV
from ui import teacher
from ui.teacher import (
    MAX_PASSCODE_CHARS,
    MAX_REASON_CHARS,
    check_reason,
    configured_passcode,
    passcode_matches,
)


@pytest.fixture
def secrets_at(tmp_path):
    """`secrets_at(text)`: a real st.secrets-like Secrets reading only tmp_path/secrets.toml (None: no file).

    Streamlit copies string secrets into os.environ when it parses them: the variable is removed afterwards."""
    before_files, before_env = config.get_option("secrets.files"), os.environ.get(PASSCODE_ENV)
    path = tmp_path / "secrets.toml"

    def make(text: str | None) -> Secrets:
        if text is not None:
            path.write_text(text, encoding="utf-8")
        config.set_option("secrets.files", [str(path)])
        return Secrets()

    yield make
    config.set_option("secrets.files", before_files)
    if before_env is None:
        os.environ.pop(PASSCODE_ENV, None)
    else:
        os.environ[PASSCODE_ENV] = before_env


def test_the_environment_variable_is_the_passcode_and_wins_over_secrets(secrets_at):
    secrets = secrets_at(f'{PASSCODE_ENV} = "from the secrets file"\n')
    assert configured_passcode({PASSCODE_ENV: "from the environment"}, secrets) == "from the environment"


def test_without_the_environment_variable_the_secrets_file_gives_it(secrets_at):
    assert configured_passcode({}, secrets_at(f'{PASSCODE_ENV} = "s3cret phrase"\n')) == "s3cret phrase"
    assert (
        configured_passcode({PASSCODE_ENV: "  "}, secrets_at(f'{PASSCODE_ENV} = "s3cret phrase"\n')) == "s3cret phrase"
    )
    assert configured_passcode({}, secrets_at(f"{PASSCODE_ENV} = 4821\n")) == "4821"  # a TOML number: its digits


def test_no_secrets_file_a_broken_one_or_no_entry_means_not_configured_and_never_raises(secrets_at):
    absent = secrets_at(None)
    with pytest.raises(FileNotFoundError):  # what st.secrets itself does with no file: the helper must absorb it
        absent.get(PASSCODE_ENV)
    assert configured_passcode({}, secrets_at(None)) == ""
    assert configured_passcode({}, secrets_at("this is = = not toml [")) == ""
    assert configured_passcode({}, secrets_at('OTHER = "x"\n')) == ""
    assert configured_passcode({}, secrets_at(f"[{PASSCODE_ENV}]\nnested = 1\n")) == ""  # a table is not a passcode
    assert configured_passcode({PASSCODE_ENV: ""}, secrets_at(f'{PASSCODE_ENV} = "   "\n')) == ""  # blanks: not set


def test_the_defaults_read_os_environ(monkeypatch, secrets_at):
    secrets_at(None)  # st.secrets is not consulted while the environment has it
    monkeypatch.setenv(PASSCODE_ENV, "from os.environ")
    assert configured_passcode() == "from os.environ"


def test_a_typed_passcode_matches_only_the_configured_one_through_compare_digest(monkeypatch):
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(teacher.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    assert passcode_matches("élève-7", "élève-7")
    assert calls == [("élève-7".encode(), "élève-7".encode())]  # bytes, in constant time
    assert not passcode_matches("eleve-7", "élève-7")
    assert not passcode_matches("élève-", "élève-7") and not passcode_matches("élève-77", "élève-7")
    assert not passcode_matches("", "élève-7")
    assert not passcode_matches("", "") and not passcode_matches("anything", "")  # not configured: nothing opens


def test_a_passcode_longer_than_the_bound_never_matches():
    long = "x" * (MAX_PASSCODE_CHARS + 1)
    assert passcode_matches("x" * MAX_PASSCODE_CHARS, "x" * MAX_PASSCODE_CHARS)
    assert not passcode_matches(long, long)


def test_a_reason_is_required_bounded_and_its_whitespace_collapsed():
    assert check_reason("  users report\tbad   suggestions ") == "users report bad suggestions"
    with pytest.raises(ValueError, match="a reason is required"):
        check_reason(" \n ")
    assert check_reason("y" * MAX_REASON_CHARS) == "y" * MAX_REASON_CHARS
    with pytest.raises(ValueError, match=f"{MAX_REASON_CHARS + 1} characters; keep it to {MAX_REASON_CHARS}"):
        check_reason("y" * (MAX_REASON_CHARS + 1))
