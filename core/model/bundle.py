"""A model bundle: everything needed to reproduce a model's predictions, versioned together.

A bundle is a directory holding exactly two files:

    manifest.json       format_version, kind ("transformer"), version, created, tokenizer (its to_dict()
                        plus content_hash), architecture (asdict(ModelConfig)), corpus (fingerprint,
                        source), training (command, metrics, config), safe and unsafe_reason,
                        prompt_template, generation (asdict(SampleConfig) + the cache policy),
                        files {name: sha256} for every file except manifest.json itself
    model.safetensors   the weights, float32; the tied LM head is stored once, as token_embedding.weight

`version` is the first 16 hex digits of the sha256 of the canonical manifest JSON without `version`
and `created`; since `files` holds the weights' hash, it names weights and manifest together, and any
edit of the manifest (a flipped `safe`, a changed architecture) shows as a version mismatch. It is an
integrity check against accidents and half-copied directories, not a signature.

Weights are read with safetensors only (no pickle, no torch.load: a pickle can run code on load).
`load_bundle` checks, in this order, and refuses with a BundleError naming the file, field or tensor:
no entry of the directory is a symbolic link (a link can point anywhere: a bundle holds its own files)
and it has at most MAX_BUNDLE_ENTRIES entries; the manifest is at most MAX_MANIFEST_BYTES, parses and
has every field with the right type; the format version and kind are supported; every listed file
exists with its sha256 and no unlisted file is present; the version matches; the architecture is a
valid ModelConfig (every number within the bounds of core.model.gpt: MAX_D_MODEL, MAX_PARAMETERS, ...);
the safetensors header lists exactly the tensors `expected_tensors(config)` computes in closed form,
with the same shapes and dtype float32 -- all before any model is allocated, so a manifest declaring a
huge model over small tensors costs nothing; every tensor is finite and within MAX_ABS_WEIGHT; the
tokenizer's vocabulary size equals config.vocab_size; `safe` is False for a model trained without the
causal mask; only then is GPT(config) built and load_state_dict(strict=True) run.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from core.model.corpus import Corpus
from core.model.gpt import GPT, ModelConfig
from core.model.kv_cache import default_keep
from core.model.sampling import SampleConfig
from core.model.tokenizer import CharTokenizer

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)
KIND = "transformer"  # the release work adds other kinds ("ngram", "rule"); load_bundle loads this one
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"
DEFAULT_PROMPT_TEMPLATE = "{prompt}"  # raw text, no <bos>: training windows start anywhere in a document
VERSION_LENGTH = 16  # hex digits of a version (manifest_version)
_VERSION_RE = re.compile(f"[0-9a-f]{{{VERSION_LENGTH}}}")
MAX_MANIFEST_BYTES = 4 << 20  # the shipped manifest is ~3 kB; a 65536-character vocabulary is under 1 MB of JSON
MAX_BUNDLE_ENTRIES = 64  # a bundle holds 2 files; the directory is listed at most this far
# Largest |weight| a bundle may hold. The shipped models/default reaches 1.59 (measured with
# safetensors over every tensor); a trained model here stays below 10. 1e4 leaves room for any honest
# training and refuses values (3e38 was tried) whose products overflow float32 into inf and NaN.
MAX_ABS_WEIGHT = 1e4
NO_MASK_REASON = (
    "trained without the causal mask: every position saw the token it had to predict, so its "
    "low loss is leakage, not skill, and its predictions are not usable"
)

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


@dataclass(frozen=True)
class Bundle:
    model: GPT  # eval mode
    tokenizer: CharTokenizer
    manifest: dict
    path: Path

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def safe(self) -> bool:
        return self.manifest["safe"]

    @property
    def sample_config(self) -> SampleConfig:
        """The generation policy stored with the model."""
        fields = {f.name for f in dataclasses.fields(SampleConfig)}
        return SampleConfig(**{k: v for k, v in self.manifest["generation"].items() if k in fields})

    @property
    def use_cache(self) -> bool:
        return self.manifest["generation"]["use_cache"]


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_version(manifest: dict) -> str:
    """16 hex digits of sha256 over the canonical JSON of the manifest without version and created."""
    content = {k: v for k, v in manifest.items() if k not in ("version", "created")}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:VERSION_LENGTH]


def is_version(name: object) -> bool:
    """True for a version name of the form manifest_version produces: 16 lowercase hex digits."""
    return isinstance(name, str) and _VERSION_RE.fullmatch(name) is not None


def expected_tensors(config: ModelConfig) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """What a bundle of `config` stores, in closed form (nothing is allocated): name -> shape in the
    order of GPT(config).state_dict(), and alias -> stored name for the tied LM head. tests/test_bundle.py
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


def read_manifest_text(path: Path) -> str:
    """manifest.json's text, refused (BundleError) past MAX_MANIFEST_BYTES before it is read."""
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise BundleError(f"{MANIFEST} is {size:,} bytes, more than MAX_MANIFEST_BYTES={MAX_MANIFEST_BYTES:,}")
    return path.read_text(encoding="utf-8")


def save_bundle(
    out_dir: str | os.PathLike,
    model: GPT,
    tokenizer: CharTokenizer,
    *,
    metrics: dict,
    command: list[str],
    corpus: Corpus,
    train_config: Any = None,
    sample_config: SampleConfig | None = None,
    use_cache: bool = True,
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
    unsafe_reason: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a bundle to `out_dir` atomically and return its path.

    The files are written to a temporary sibling directory, loaded back with `load_bundle` (so a
    bundle that would be refused is never installed), then renamed into place. `out_dir` must pass
    `check_out_dir`: new or empty, or (only with overwrite=True) an existing bundle, which is then
    replaced; nothing else is ever replaced. A model built with causal=False is saved with safe=False
    and NO_MASK_REASON; pass `unsafe_reason` to mark any other model unsafe.
    """
    if not isinstance(model, GPT) or not isinstance(tokenizer, CharTokenizer):
        raise BundleError(
            f"save_bundle needs a GPT and a CharTokenizer, got {type(model).__name__} and {type(tokenizer).__name__}"
        )
    config = model.config
    if tokenizer.vocab_size != config.vocab_size:
        raise BundleError(
            f"tokenizer vocabulary ({tokenizer.vocab_size}) differs from the model's vocab_size "
            f"({config.vocab_size}); save the tokenizer the model was trained with"
        )
    if not isinstance(command, (list, tuple)) or not all(isinstance(a, str) for a in command):
        raise BundleError(f"command must be a list of strings (argv), got {command!r}")
    if "{prompt}" not in prompt_template:
        raise BundleError(f"prompt_template must contain '{{prompt}}', got {prompt_template!r}")
    if not config.causal:
        unsafe_reason = NO_MASK_REASON if unsafe_reason is None else f"{NO_MASK_REASON}; {unsafe_reason}"
    sample_config = SampleConfig() if sample_config is None else sample_config
    tensors, _ = _stored_tensors(model)
    for name, t in tensors.items():
        if t.dtype != torch.float32 or not torch.isfinite(t).all():
            raise BundleError(
                f"tensor {name!r} is not finite float32 ({t.dtype}); training diverged or the "
                f"model was converted: lower the learning rate and train again"
            )
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "version": "",
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "tokenizer": {**tokenizer.to_dict(), "content_hash": tokenizer.content_hash},
        "architecture": dataclasses.asdict(config),
        "corpus": {"fingerprint": corpus.fingerprint, "source": corpus.source},
        "training": {
            "command": list(command),
            "metrics": dict(metrics),
            "config": dataclasses.asdict(train_config) if dataclasses.is_dataclass(train_config) else None,
        },
        "safe": unsafe_reason is None,
        "unsafe_reason": unsafe_reason,
        "prompt_template": prompt_template,
        "generation": {
            **dataclasses.asdict(sample_config),
            "use_cache": bool(use_cache),
            "keep": default_keep(config.context_length),
        },
        "files": {},
    }
    out = check_out_dir(out_dir, overwrite=overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        save_file(
            {k: t.detach().contiguous() for k, t in tensors.items()}, str(tmp / WEIGHTS), metadata={"format": "pt"}
        )
        manifest["files"] = {WEIGHTS: file_sha256(tmp / WEIGHTS)}
        try:
            manifest["version"] = manifest_version(manifest)
        except ValueError as e:  # NaN / inf in metrics
            raise BundleError(f"metrics must be finite JSON values, got {metrics!r} ({e})") from None
        write_manifest(tmp, manifest)
        load_bundle(tmp)  # never install a bundle the loader would refuse
        for file in tmp.iterdir():
            os.chmod(file, 0o644)  # temporary files are created private; a bundle is for everyone to read
        os.chmod(tmp, 0o755)
        _replace_dir(tmp, out, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_out_dir(path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Raise BundleError (one line: what is wrong, what to do) unless a bundle can be saved at `path`;
    return it as a Path. Call it before training, so a bad path never throws a trained model away.

    Accepted: a directory that does not exist yet (its nearest existing ancestor must be a directory we
    can create entries in: tried with a temporary directory, removed at once), an empty directory, and
    an existing bundle only with overwrite=True. Refused: a file, a non-empty directory that is not a
    bundle (even with overwrite: it is not ours to delete), an existing bundle without overwrite."""
    out = Path(path)
    try:
        if out.exists():
            if not out.is_dir():
                raise BundleError(f"{str(out)!r} is a file, not a directory; choose a new directory for the bundle")
            if any(out.iterdir()):
                if not (out / MANIFEST).is_file():
                    raise BundleError(
                        f"{str(out)!r} exists and is not a bundle directory (it holds other files); "
                        "choose a new or empty directory"
                    )
                if not overwrite:
                    raise BundleError(
                        f"{str(out)!r} already holds a bundle; choose a new directory, or replace "
                        "it with --overwrite (overwrite=True)"
                    )
        ancestor = out.absolute().parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise BundleError(f"cannot create {str(out)!r}: {str(ancestor)!r} is a file, not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name or 'bundle'}.", suffix=".check", dir=ancestor))
    except BundleError:
        raise
    except OSError as e:
        raise BundleError(
            f"cannot write a bundle to {str(out)!r} ({e.strerror or e}); choose a directory you can write to"
        ) from None
    return out


def write_manifest(bundle_dir: str | os.PathLike, manifest: dict) -> None:
    """Write manifest.json (ASCII JSON, indented) and fsync it."""
    path = Path(bundle_dir) / MANIFEST
    with open(path, "w", encoding="ascii") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=True, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def load_bundle(path: str | os.PathLike) -> Bundle:
    """Verify and load a bundle (see the module docstring for the checks); raises BundleError."""
    problems, loaded = _inspect(Path(path))
    if problems:
        raise BundleError(f"bundle {str(path)!r} refused: " + "; ".join(problems))
    return loaded


def verify_bundle(path: str | os.PathLike) -> list[str]:
    """Every problem found, each naming its file, field or tensor; an empty list means the bundle loads.

    Checks run in stages (manifest, files, tensors, model): a stage with problems stops the later ones.
    """
    return _inspect(Path(path))[0]


# ---- the checks ----------------------------------------------------------------------------------


def _inspect(path: Path) -> tuple[list[str], Bundle | None]:
    try:
        return _inspect_files(path)
    except BundleError as e:
        return [str(e)], None
    except OSError as e:  # a file that cannot be read (permissions, I/O) is a refusal, not a crash
        return [f"{str(path)!r} could not be read ({type(e).__name__}: {e})"], None


def _inspect_files(path: Path) -> tuple[list[str], Bundle | None]:
    manifest_path = path / MANIFEST
    if not path.is_dir():
        return [f"{str(path)!r} is not a directory (missing bundle)"], None
    problems = entry_problems(path)
    if problems:
        return problems, None
    if not manifest_path.is_file():
        return [f"{MANIFEST} is missing"], None
    try:
        manifest = json.loads(read_manifest_text(manifest_path))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{MANIFEST} is not valid JSON ({e})"], None
    problems = _check_fields(manifest)
    if problems:
        return problems, None
    if manifest["format_version"] not in SUPPORTED_FORMAT_VERSIONS:
        return [
            f"{MANIFEST}: format_version {manifest['format_version']} is not supported "
            f"(supported: {list(SUPPORTED_FORMAT_VERSIONS)}); update Attention Lab"
        ], None
    if manifest["kind"] != KIND:
        return [f"{MANIFEST}: kind {manifest['kind']!r} is not a {KIND!r} bundle"], None
    problems = _check_files(path, manifest["files"])
    if problems:
        return problems, None
    if manifest_version(manifest) != manifest["version"]:
        return [
            f"{MANIFEST}: version {manifest['version']!r} does not match its content "
            f"({manifest_version(manifest)!r}); the manifest was edited after it was written"
        ], None
    config, tokenizer, problems = _parse_model_fields(manifest)
    if problems:
        return problems, None
    expected, aliases = expected_tensors(config)  # closed form: the header is checked before any allocation
    tensors, problems = _read_tensors(path / WEIGHTS, expected)
    if problems:
        return problems, None
    if tokenizer.vocab_size != config.vocab_size:
        return [
            f"tokenizer vocabulary size {tokenizer.vocab_size} differs from architecture.vocab_size {config.vocab_size}"
        ], None
    if not config.causal and manifest["safe"]:
        return [
            f"{MANIFEST}: safe is true but architecture.causal is false (a model without the causal mask is never safe)"
        ], None
    with torch.random.fork_rng(devices=[]):  # the throwaway initialisation must not move the caller's RNG
        model = GPT(config)  # only now: the header matched, so this is the size of the file just read
    state = dict(tensors)
    state.update({alias: tensors[source] for alias, source in aliases.items()})
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        return [f"{WEIGHTS}: load_state_dict refused the weights ({e})"], None
    model.eval()
    return [], Bundle(model, tokenizer, manifest, path)


def _check_fields(manifest: Any) -> list[str]:
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
        if not all(isinstance(a, str) for a in manifest["training"]["command"]):
            problems.append(f"{MANIFEST}: field 'training.command' must be a list of strings")
        if "{prompt}" not in manifest["prompt_template"]:
            problems.append(f"{MANIFEST}: field 'prompt_template' must contain '{{prompt}}'")
        if manifest["safe"] == (manifest["unsafe_reason"] is not None):
            problems.append(f"{MANIFEST}: 'unsafe_reason' must be null exactly when 'safe' is true")
    return problems


def _check_files(path: Path, files: dict) -> list[str]:
    problems = []
    if WEIGHTS not in files:
        problems.append(f"{MANIFEST}: files does not list {WEIGHTS}")
    for name, digest in files.items():
        if name in (MANIFEST, "", ".", "..") or "/" in name or "\\" in name or not isinstance(digest, str):
            problems.append(f"{MANIFEST}: files entry {name!r} is not a plain file name with a sha256 string")
            continue
        file = path / name
        if not file.is_file():
            problems.append(f"{name} is missing")
        elif file_sha256(file) != digest:
            problems.append(
                f"{name}: sha256 mismatch (the file was changed or truncated; it is "
                f"{file.stat().st_size} bytes): expected {digest[:16]}..., got {file_sha256(file)[:16]}..."
            )
    for extra in sorted(p.name for p in path.iterdir() if p.name != MANIFEST and p.name not in files):
        problems.append(f"unexpected file {extra!r} is not listed in {MANIFEST}")
    return problems


def _parse_model_fields(manifest: dict) -> tuple[ModelConfig | None, CharTokenizer | None, list[str]]:
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


def _read_tensors(path: Path, expected: dict[str, tuple[int, ...]]) -> tuple[dict[str, torch.Tensor], list[str]]:
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


def _stored_tensors(model: GPT) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(name -> tensor stored in the file, alias -> name it shares memory with). A tied weight is
    stored once, under the first name state_dict() gives it (token_embedding.weight)."""
    stored, aliases, seen = {}, {}, {}
    for name, t in model.state_dict().items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            stored[name] = t
    return stored, aliases


def _replace_dir(tmp: Path, out: Path, *, overwrite: bool = False) -> None:
    """Rename tmp to out. With overwrite an existing out is moved aside first and removed after.
    Without it, out is never replaced: the rename succeeds only onto nothing or an empty directory
    (POSIX rename), and if something appeared at out since check_out_dir, the new bundle is kept
    under a visible sibling name that the BundleError gives, so nothing is lost either way."""
    if not overwrite or not out.exists():
        try:
            os.rename(tmp, out)
        except OSError as e:
            kept = out.parent / f"{out.name}.new-{uuid.uuid4().hex[:8]}"
            os.rename(tmp, kept)
            raise BundleError(
                f"{str(out)!r} appeared while the bundle was being saved ({e.strerror or e}); "
                f"nothing there was replaced and the new bundle is kept in {str(kept)!r}"
            ) from None
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
