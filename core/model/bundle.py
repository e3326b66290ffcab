"""A model bundle: a directory of exactly two files, manifest.json and model.safetensors, everything needed to
reproduce a model's predictions, versioned together.

`version` hashes the canonical manifest (which holds the weights' sha256), so any edit of either shows as a
mismatch: an integrity check against accidents and half-copied directories, not a signature. Weights are read with
safetensors only (a pickle can run code on load). Loading checks, in stages, the entries, the manifest's fields,
format and kind, every file's sha256, the version, the architecture's bounds, the tensor header, finite weights
and the vocabulary, and refuses with a BundleError naming the file, field or tensor, all before any model is
allocated, so a manifest declaring a huge model over small tensors costs nothing. Writing is staged, loaded back,
then installed; without overwrite nothing at the target is ever replaced.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from core.files import install_dir, staged_dir, write_json
from core.model.bundle_checks import (
    MANIFEST,
    WEIGHTS,
    BundleError,
    check_fields,
    check_files,
    entry_problems,
    expected_tensors,
    file_sha256,
    parse_model_fields,
    read_manifest,
    read_tensors,
)
from core.model.corpus import Corpus
from core.model.engine import default_keep
from core.model.gpt import GPT, ModelConfig
from core.model.sampling import SampleConfig
from core.model.tokenizer import CharTokenizer
from core.numbers import is_int

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)
KIND = "transformer"  # the release work adds other kinds ("ngram", "rule"); load_bundle loads this one
DEFAULT_PROMPT_TEMPLATE = "{prompt}"  # raw text, no <bos>: training windows start anywhere in a document
VERSION_LENGTH = 16  # hex digits of a version (manifest_version)
_VERSION_RE = re.compile(f"[0-9a-f]{{{VERSION_LENGTH}}}")
NO_MASK_REASON = (
    "trained without the causal mask: every position saw the token it had to predict, so its "
    "low loss is leakage, not skill, and its predictions are not usable"
)


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


def manifest_version(manifest: dict) -> str:
    """16 hex digits of sha256 over the canonical JSON of the manifest without version and created."""
    content = {k: v for k, v in manifest.items() if k not in ("version", "created")}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:VERSION_LENGTH]


def is_version(name: object) -> bool:
    """True for a version name of the form manifest_version produces: 16 lowercase hex digits."""
    return isinstance(name, str) and _VERSION_RE.fullmatch(name) is not None


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
    world_size: int = 1,
    launch_command: list[str] | None = None,
    base: Bundle | None = None,
) -> Path:
    """Write a bundle to `out_dir` atomically and return its path.

    The files are written to a temporary sibling directory, loaded back with `load_bundle` (so a
    bundle that would be refused is never installed), then renamed into place. `out_dir` must pass
    `check_out_dir`: new or empty, or (only with overwrite=True) an existing bundle, which is then
    replaced; nothing else is ever replaced. A model built with causal=False is saved with safe=False
    and NO_MASK_REASON; pass `unsafe_reason` to mark any other model unsafe. `world_size` is the number of
    processes that trained it (a distributed run) and `launch_command` the line that started them
    (`command` by default: a single process is started by its own command). `base` is the bundle the run started
    from (train --init-from): the manifest records its version and corpus under "base" (absent for a fresh model).
    """
    if not isinstance(model, GPT) or not isinstance(tokenizer, CharTokenizer):
        raise BundleError(
            f"save_bundle needs a GPT and a CharTokenizer, got {type(model).__name__} and {type(tokenizer).__name__}"
        )
    if base is not None and not isinstance(base, Bundle):
        raise BundleError(f"base must be the Bundle the run started from, got {type(base).__name__}")
    config = model.config
    if tokenizer.vocab_size != config.vocab_size:
        raise BundleError(
            f"tokenizer vocabulary ({tokenizer.vocab_size}) differs from the model's vocab_size "
            f"({config.vocab_size}); save the tokenizer the model was trained with"
        )
    if not isinstance(command, (list, tuple)) or not all(isinstance(a, str) for a in command):
        raise BundleError(f"command must be a list of strings (argv), got {command!r}")
    launch = list(command) if launch_command is None else launch_command
    if not isinstance(launch, (list, tuple)) or not all(isinstance(a, str) for a in launch):
        raise BundleError(f"launch_command must be a list of strings (argv), got {launch_command!r}")
    if not is_int(world_size) or world_size < 1:
        raise BundleError(f"world_size must be an integer >= 1, got {world_size!r}")
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
        **({} if base is None else {"base": base_record(base)}),
        "training": {
            "command": list(command),
            "metrics": dict(metrics),
            "config": dataclasses.asdict(train_config)
            if dataclasses.is_dataclass(train_config) and not isinstance(train_config, type)
            else None,
            "world_size": world_size,
            "launch_command": list(launch),
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
    with staged_dir(out) as tmp:  # removed if anything below raises
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
        # Without overwrite nothing at `out` is replaced: a directory that appeared there since check_out_dir
        # keeps its content, and the new bundle is kept under `out.new-xxxxxxxx`, named in the BundleError.
        install_dir(tmp, out, overwrite=overwrite, error=BundleError)
    return out


def base_record(base: Bundle) -> dict:
    """What a manifest records of the bundle a run started from: its version and the corpus it was trained on."""
    corpus = base.manifest["corpus"]
    return {"version": base.version, "corpus": {"source": corpus["source"], "fingerprint": corpus["fingerprint"]}}


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
    """Write manifest.json (ASCII JSON, indented, no NaN) and fsync it: `write_json`."""
    write_json(Path(bundle_dir) / MANIFEST, manifest)


def load_bundle(path: str | os.PathLike) -> Bundle:
    """Verify and load a bundle (see the module docstring for the checks); raises BundleError."""
    problems, loaded = _inspect(Path(path))
    if loaded is None:  # _inspect gives a bundle exactly when it found no problem
        raise BundleError(f"bundle {str(path)!r} refused: " + "; ".join(problems))
    return loaded


def verify_bundle(path: str | os.PathLike) -> list[str]:
    """Every problem found, each naming its file, field or tensor; an empty list means the bundle loads.

    Checks run in stages (manifest, files, tensors, model): a stage with problems stops the later ones.
    """
    return _inspect(Path(path))[0]


# ---- loading: the bundle checks in stages, then the model -------------------------------------------


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
    if not os.path.lexists(manifest_path):
        return [f"{MANIFEST} is missing"], None
    manifest = read_manifest(manifest_path)  # a FIFO, too deep, 1e400 or not JSON: a BundleError naming file and field
    problems = check_fields(manifest)
    if problems:
        return problems, None
    if manifest.get("base") is not None and not is_version(manifest["base"]["version"]):
        return [f"{MANIFEST}: base.version is not a version name ({VERSION_LENGTH} lowercase hex digits)"], None
    if manifest["format_version"] not in SUPPORTED_FORMAT_VERSIONS:
        return [
            f"{MANIFEST}: format_version {manifest['format_version']} is not supported "
            f"(supported: {list(SUPPORTED_FORMAT_VERSIONS)}); update Attention Lab"
        ], None
    if manifest["kind"] != KIND:
        return [f"{MANIFEST}: kind {manifest['kind']!r} is not a {KIND!r} bundle"], None
    problems = check_files(path, manifest["files"])
    if problems:
        return problems, None
    if manifest_version(manifest) != manifest["version"]:
        return [
            f"{MANIFEST}: version {manifest['version']!r} does not match its content "
            f"({manifest_version(manifest)!r}); the manifest was edited after it was written"
        ], None
    config, tokenizer, problems = parse_model_fields(manifest)
    if config is None or tokenizer is None:  # both are given exactly when there is no problem
        return problems, None
    expected, aliases = expected_tensors(config)  # closed form: the header is checked before any allocation
    tensors, problems = read_tensors(path / WEIGHTS, expected)
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


def _stored_tensors(model: GPT) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(name -> tensor stored in the file, alias -> name it shares memory with). A tied weight is
    stored once, under the first name state_dict() gives it (token_embedding.weight)."""
    stored: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, int, tuple[int, ...], tuple[int, ...]], str] = {}
    for name, t in model.state_dict().items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            stored[name] = t
    return stored, aliases
