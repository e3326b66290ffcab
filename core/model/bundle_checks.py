"""What a bundle directory must hold, checked before anything is allocated: entries, manifest, files, tensors.

The transformer and baseline loaders run these in stages and stop at the first stage with problems. Each returns
one-line problems naming the file, field or tensor and never raises on a hostile bundle (reading the manifest
raises BundleError).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from core.files import FileRefused, open_regular
from core.jsonfile import JsonFileError, read_json
from core.model.gpt import ModelConfig
from core.model.sampling import SampleConfig
from core.model.tokenizer import CharTokenizer
from core.numbers import is_int

MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"
MAX_MANIFEST_BYTES = 4 << 20  # the shipped manifest is ~3 kB; a 65536-character vocabulary is under 1 MB of JSON
MANIFEST_FIX = "the bundle was damaged or edited by hand; save or copy it again"
MAX_BUNDLE_ENTRIES = 64  # a bundle holds 2 files; the directory is listed at most this far
# Largest |weight| a bundle may hold. The shipped models/default reaches 1.59 (measured with
# safetensors over every tensor); a trained model here stays below 10. 1e4 leaves room for any honest
# training and refuses values (3e38 was tried) whose products overflow float32 into inf and NaN.
MAX_ABS_WEIGHT = 1e4
MAX_BASE_TEXT = 1_000  # characters of each string "base" records (a version is 16, a fingerprint 64, a source a path)
# Field -> required JSON type(s). bool is checked apart from int (json gives True for true).
_FIELDS: dict[str, tuple[type, ...]] = {
    "format_version": (int,),
    "kind": (str,),
    "version": (str,),
    "created": (str,),
    "tokenizer": (dict,),
    "architecture": (dict,),
    "corpus": (dict,),
    "training": (dict,),
    "safe": (bool,),
    "unsafe_reason": (str, type(None)),
    "prompt_template": (str,),
    "generation": (dict,),
    "files": (dict,),
}
_NESTED: dict[str, dict[str, tuple[type, ...]]] = {
    "tokenizer": {"content_hash": (str,), "chars": (list,)},
    "corpus": {"fingerprint": (str,), "source": (str,)},
    "training": {"command": (list,), "metrics": (dict,)},
    "generation": {"use_cache": (bool,), "keep": (int,)},
}


class BundleError(ValueError):
    """A bundle cannot be written or loaded; the message says which file, field or tensor failed."""


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a bundle's file, opened by `open_regular`: BundleError for a FIFO (which would hang
    the read), a device (/dev/zero never ends) or a link that replaced the file since it was listed."""
    h = hashlib.sha256()
    try:
        with open_regular(path) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except FileRefused as e:
        raise BundleError(f"{Path(path).name} is {e.problem}; {MANIFEST_FIX}") from None
    return h.hexdigest()


def expected_tensors(config: ModelConfig) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """What a bundle of `config` stores, in closed form (nothing is allocated): name -> shape in the
    order of GPT(config).state_dict(), and alias -> stored name for the tied LM head. tests/model/test_bundle.py
    holds it to the tensors of a real GPT(config) for every preset."""
    V, C, R = config.vocab_size, config.d_model, config.mlp_ratio * config.d_model
    shapes: dict[str, tuple[int, ...]] = {"token_embedding.weight": (V, C)}
    for i in range(config.n_layer):  # n_layer <= MAX_LAYERS
        b = f"blocks.{i}."
        shapes.update(
            {
                b + "norm_attn.weight": (C,),
                b + "norm_attn.bias": (C,),
                b + "attn.qkv.weight": (3 * C, C),
                b + "attn.proj.weight": (C, C),
                b + "norm_mlp.weight": (C,),
                b + "norm_mlp.bias": (C,),
                b + "mlp.fc.weight": (R, C),
                b + "mlp.proj.weight": (C, R),
            }
        )
    shapes.update({"norm_final.weight": (C,), "norm_final.bias": (C,)})
    return shapes, {"lm_head.weight": "token_embedding.weight"}


def entry_problems(path: Path) -> list[str]:
    """The directory's entries that no bundle may hold: symbolic links (each named) and, past
    MAX_BUNDLE_ENTRIES, the rest. Shared by the transformer and the baseline loaders."""
    entries = list(itertools.islice(path.iterdir(), MAX_BUNDLE_ENTRIES + 1))
    if len(entries) > MAX_BUNDLE_ENTRIES:
        return [
            f"{str(path)!r} holds more than {MAX_BUNDLE_ENTRIES} entries; a bundle holds only the files its "
            f"{MANIFEST} lists"
        ]
    return [
        f"{p.name} is a symbolic link (to {os.readlink(p)!r}); a bundle holds its own files: copy the file "
        f"into the bundle instead of linking it"
        for p in sorted(entries)
        if p.is_symlink()
    ]


def read_manifest(path: Path) -> Any:
    """manifest.json's value, opened by `open_regular` (never a FIFO, a device or a symbolic link: one to
    /dev/zero was read until memory ran out) and read by the bounded JSON reader; BundleError naming the file, and
    the field that holds a NaN, an Infinity, an overflowing number or a repeated key, for anything it refuses
    (json.loads alone raised RecursionError on deep nesting). Every reader of a manifest comes here."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_MANIFEST_BYTES:
                raise BundleError(f"{MANIFEST} is {size:,} bytes, more than MAX_MANIFEST_BYTES={MAX_MANIFEST_BYTES:,}")
            data = f.read(MAX_MANIFEST_BYTES + 1)  # it may have grown since fstat: read_json refuses it then
    except FileRefused as e:
        raise BundleError(f"{MANIFEST} is {e.problem}; {MANIFEST_FIX}") from None
    try:
        return read_json(data, MANIFEST, max_bytes=MAX_MANIFEST_BYTES, fix=MANIFEST_FIX)
    except JsonFileError as e:
        raise BundleError(str(e)) from None


def check_fields(manifest: Any) -> list[str]:
    if not isinstance(manifest, dict):
        return [f"{MANIFEST} must hold a JSON object, got {type(manifest).__name__}"]
    problems = []
    for section, fields in [(None, _FIELDS), *[(s, f) for s, f in _NESTED.items()]]:
        where = manifest if section is None else manifest.get(section)
        if not isinstance(where, dict):
            continue  # the missing section is reported by the top-level pass
        for name, types in fields.items():
            label = name if section is None else f"{section}.{name}"
            if name not in where:
                problems.append(f"{MANIFEST}: field {label!r} is missing")
            elif not isinstance(where[name], types) or (isinstance(where[name], bool) and bool not in types):
                wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                problems.append(f"{MANIFEST}: field {label!r} must be {wanted}, got {type(where[name]).__name__}")
    if not problems:
        training = manifest["training"]
        if not all(isinstance(a, str) for a in training["command"]):
            problems.append(f"{MANIFEST}: field 'training.command' must be a list of strings")
        # world_size and launch_command (a distributed run, core.model.distributed): optional, older bundles lack them
        size = training.get("world_size", 1)
        if not is_int(size) or size < 1:
            problems.append(f"{MANIFEST}: field 'training.world_size' must be an integer >= 1, got {size!r}"[:200])
        launch = training.get("launch_command", [])
        if not isinstance(launch, list) or not all(isinstance(a, str) for a in launch):
            problems.append(f"{MANIFEST}: field 'training.launch_command' must be a list of strings")
        problems += base_problems(manifest.get("base"))
        if "{prompt}" not in manifest["prompt_template"]:
            problems.append(f"{MANIFEST}: field 'prompt_template' must contain '{{prompt}}'")
        if manifest["safe"] == (manifest["unsafe_reason"] is not None):
            problems.append(f"{MANIFEST}: 'unsafe_reason' must be null exactly when 'safe' is true")
    return problems


def base_problems(base: Any) -> list[str]:
    """The optional "base" field (the bundle a run started from, train --init-from): absent or null for a fresh
    model, else exactly {"version": str, "corpus": {"source": str, "fingerprint": str}}, each string at most
    MAX_BASE_TEXT characters. The version's form is checked where versions are made (bundle.is_version)."""
    if base is None:
        return []
    corpus = base.get("corpus") if isinstance(base, dict) else None
    strings = [base.get("version"), *corpus.values()] if isinstance(corpus, dict) else []
    if (
        not isinstance(base, dict)
        or set(base) != {"version", "corpus"}
        or not isinstance(corpus, dict)
        or set(corpus) != {"source", "fingerprint"}
        or not all(isinstance(v, str) and len(v) <= MAX_BASE_TEXT for v in strings)
    ):
        return [
            f'{MANIFEST}: field \'base\' must be null or {{"version", "corpus": {{"source", "fingerprint"}}}} '
            f"holding strings of at most {MAX_BASE_TEXT} characters"
        ]
    return []


def check_files(path: Path, files: dict) -> list[str]:
    problems = []
    if WEIGHTS not in files:
        problems.append(f"{MANIFEST}: files does not list {WEIGHTS}")
    for name, digest in files.items():
        if name in (MANIFEST, "", ".", "..") or "/" in name or "\\" in name or not isinstance(digest, str):
            problems.append(f"{MANIFEST}: files entry {name!r} is not a plain file name with a sha256 string")
            continue
        file = path / name
        if not file.is_file():
            problems.append(f"{name} is not a regular file" if os.path.lexists(file) else f"{name} is missing")
        elif file_sha256(file) != digest:
            problems.append(
                f"{name}: sha256 mismatch (the file was changed or truncated; it is "
                f"{file.stat().st_size} bytes): expected {digest[:16]}..., got {file_sha256(file)[:16]}..."
            )
    for extra in sorted(p.name for p in path.iterdir() if p.name != MANIFEST and p.name not in files):
        problems.append(f"unexpected file {extra!r} is not listed in {MANIFEST}")
    return problems


def parse_model_fields(manifest: dict) -> tuple[ModelConfig | None, CharTokenizer | None, list[str]]:
    arch = manifest["architecture"]
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    if set(arch) != names:
        return (
            None,
            None,
            [
                f"{MANIFEST}: architecture needs exactly the fields {sorted(names)}, "
                f"missing {sorted(names - set(arch))}, unknown {sorted(set(arch) - names)}"
            ],
        )
    try:
        config = ModelConfig(**arch)
    except ValueError as e:
        return None, None, [f"{MANIFEST}: architecture is invalid ({e})"]
    if config.vocab_size < 1:
        return None, None, [f"{MANIFEST}: architecture.vocab_size must be >= 1, got {config.vocab_size}"]
    description = {k: v for k, v in manifest["tokenizer"].items() if k != "content_hash"}
    try:
        tokenizer = CharTokenizer.from_dict(description)
    except (ValueError, TypeError) as e:
        return None, None, [f"{MANIFEST}: tokenizer is invalid ({e})"]
    if tokenizer.content_hash != manifest["tokenizer"]["content_hash"]:
        return None, None, [f"{MANIFEST}: tokenizer.content_hash does not match its vocabulary"]
    generation = manifest["generation"]
    fields = {f.name for f in dataclasses.fields(SampleConfig)}
    try:
        SampleConfig(**{k: v for k, v in generation.items() if k in fields})
    except (ValueError, TypeError) as e:
        return None, None, [f"{MANIFEST}: generation is invalid ({e})"]
    return config, tokenizer, []


def read_tensors(path: Path, expected: dict[str, tuple[int, ...]]) -> tuple[dict[str, torch.Tensor], list[str]]:
    try:
        with safe_open(str(path), framework="pt") as f:
            names = set(f.keys())
            problems = [f"{WEIGHTS}: tensor {n!r} is missing" for n in sorted(set(expected) - names)]
            problems += [f"{WEIGHTS}: unexpected tensor {n!r}" for n in sorted(names - set(expected))]
            for name in sorted(names & set(expected)):
                piece = f.get_slice(name)
                shape, dtype = tuple(piece.get_shape()), piece.get_dtype()
                want = tuple(expected[name])
                if shape != want:
                    problems.append(f"{WEIGHTS}: tensor {name!r} has shape {list(shape)}, expected {list(want)}")
                if dtype != "F32":
                    problems.append(f"{WEIGHTS}: tensor {name!r} has dtype {dtype}, expected F32 (float32)")
            if problems:
                return {}, problems
            tensors = {name: f.get_tensor(name) for name in sorted(names)}
    except Exception as e:  # safetensors raises its own error types for a corrupt header
        return {}, [f"{WEIGHTS} is not a readable safetensors file ({type(e).__name__}: {e})"]
    problems = []
    for name, t in tensors.items():
        if not torch.isfinite(t).all():
            problems.append(f"{WEIGHTS}: tensor {name!r} has {int((~torch.isfinite(t)).sum())} non-finite value(s)")
        elif t.numel() and float(t.abs().max()) > MAX_ABS_WEIGHT:
            problems.append(
                f"{WEIGHTS}: tensor {name!r} has {int((t.abs() > MAX_ABS_WEIGHT).sum())} value(s) with "
                f"|w| > MAX_ABS_WEIGHT={MAX_ABS_WEIGHT:g} (largest {float(t.abs().max()):.3g}); trained "
                f"weights here stay below 10, so the file was edited or training diverged"
            )
    return tensors, problems
