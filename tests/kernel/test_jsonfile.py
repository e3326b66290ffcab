"""core.jsonfile, the one bounded JSON reader: its depth scan agrees with the depth of the parsed value (computed
apart, recursively, on the Python object), brackets inside strings never count, and every refusal is a
JsonFileError naming the file, what was wrong and what to do: too large, too deep (no RecursionError, however
deep), NaN / Infinity with the field that holds it, a 5000-digit integer, bytes that are not UTF-8, a FIFO."""

import json
import os
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.jsonfile import DEFAULT_FIX, MAX_DEPTH, JsonFileError, nesting_depth, read_json, read_json_file

# Strings full of what the scan must skip: brackets, quotes and backslashes (json.dumps escapes the last two).
TRICKY = st.text(alphabet='[]{}"\\ ab\n', max_size=8)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=25,
)


def depth_of(value) -> int:
    """The oracle: how deeply a parsed value's lists and dicts nest, by recursion on the object."""
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


@given(VALUES, st.booleans())
def test_the_scan_measures_the_depth_json_would_recurse_to(value, indent):
    text = json.dumps(value, indent=2 if indent else None)
    assert nesting_depth(text) == depth_of(value)
    assert read_json(text, "x.json") == value


def test_a_string_that_never_ends_stops_the_scan_where_json_stops():
    assert nesting_depth('[["abc') == 2  # json.loads fails inside the string: nothing after it is structure
    assert nesting_depth('["[[[[[[' + "[" * 100) == 1


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500_000])
def test_too_deep_is_refused_before_json_recurses(depth):
    text = "[" * depth + "]" * depth
    with pytest.raises(JsonFileError) as caught:
        read_json(text, "registry/current")
    assert str(caught.value) == (
        f"registry/current: nested {depth:,} levels deep, more than the {MAX_DEPTH} a lab file needs; {DEFAULT_FIX}"
    )
    assert read_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None  # the bound itself is allowed


@pytest.mark.parametrize(
    "text, field, literal",
    [
        ('{"architecture": {"rope_base": NaN}}', "architecture.rope_base", "NaN"),
        ('{"a": [1, {"b": Infinity}]}', "a[1].b", "Infinity"),
        ("[-Infinity]", "[0]", "-Infinity"),
        ("NaN", "(the whole document)", "NaN"),
    ],
)
def test_nan_and_infinity_are_refused_naming_the_field(text, field, literal):
    with pytest.raises(JsonFileError) as caught:
        read_json(text, "manifest.json", fix="save it again")
    assert str(caught.value) == (
        f"manifest.json: field '{field}' holds {literal}, which JSON does not allow (a number must be finite); "
        "save it again"
    )
    assert read_json('{"text": "NaN"}', "x") == {"text": "NaN"}  # the word inside a string is only text


def test_other_refusals_name_the_file_and_say_what_to_do(tmp_path):
    cases = [
        (b"[1]" + b" " * 100, {"max_bytes": 100}, "103 bytes is more than the 100 it may hold"),
        ("1" * 5000, {}, "not valid JSON (Exceeds the limit (4300 digits)"),
        (b'{"a": "\xff"}', {}, "not UTF-8 text (byte 7)"),
        ('{"a": 1', {}, "not valid JSON (Expecting"),
    ]
    for data, kw, said in cases:
        with pytest.raises(JsonFileError) as caught:
            read_json(data, "log.jsonl line 3", fix="what to do", **kw)
        message = str(caught.value)
        assert message.startswith(f"log.jsonl line 3: {said}") and message.endswith("; what to do"), message
        assert isinstance(caught.value, ValueError)  # every caller's `except ValueError` catches it
        assert str(pickle.loads(pickle.dumps(caught.value))) == message  # it crosses a process boundary whole

    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 600 + b"0]")
    with pytest.raises(JsonFileError, match=r"^big.json: 1,203 bytes is more than the 1,000"):
        read_json_file(big, max_bytes=1000)  # refused by its size: stat, before a byte is read
    fifo = tmp_path / "current"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    with pytest.raises(JsonFileError, match="^current: not a regular file"):
        read_json_file(fifo)
    with pytest.raises(FileNotFoundError):  # missing: the caller's own case, as before
        read_json_file(tmp_path / "absent.json")


@pytest.mark.parametrize(
    "text, field, shown",
    [
        ('{"training": {"metrics": {"val_loss": 1e400}}}', "training.metrics.val_loss", "1e400"),
        ('{"a": [0.5, -1.7e309]}', "a[1]", "-1.7e309"),
        ('{"n": ' + "9" * 400 + "}", "n", "999999999999...99999999 (400 characters)"),
    ],
)
def test_a_number_that_overflows_a_float_is_refused_naming_the_field(text, field, shown):
    """1e400 is valid JSON that json.loads turns into inf (one in a manifest took every page down); an integer of 400
    digits overflows the first float() made of it."""
    with pytest.raises(JsonFileError) as caught:
        read_json(text, "manifest.json", fix="save it again")
    assert str(caught.value) == (
        f"manifest.json: field '{field}' holds {shown}, which overflows a float (a number must be finite); "
        "save it again"
    )
    assert read_json('[1.7e308, -1e-400, 1e308, "1e400"]', "x") == [1.7e308, -0.0, 1e308, "1e400"]  # all finite
    assert read_json("9" * 308, "x") == int("9" * 308)  # still below the largest float


def test_a_key_given_twice_is_refused_naming_it():
    """json.loads keeps the last of two equal keys: what a reader saw would not be what was checked."""
    with pytest.raises(JsonFileError) as caught:
        read_json('{"safe": false, "generation": {"keep": 1, "use_cache": true, "keep": 9}}', "manifest.json")
    assert str(caught.value).startswith(
        "manifest.json: field 'generation.keep' is given twice (json keeps the last); each key may appear once; "
    )
    with pytest.raises(JsonFileError, match=r"^x: field 'safe' is given twice"):
        read_json('{"safe": false, "safe": true}', "x")
    assert read_json('[{"a": 1}, {"a": 2}]', "x") == [{"a": 1}, {"a": 2}]  # one key in each of two objects


def test_the_duplicate_check_is_linear_in_the_number_of_keys():
    text = "{" + ",".join(f'"k{i}": {i}' for i in range(100_000)) + ', "k99999": 0}'  # the repeat comes last
    with pytest.raises(JsonFileError, match="field 'k99999' is given twice"):
        read_json(text, "x")  # a quadratic search would take minutes here
