"""The text a model learns from: a corpus of named documents, and its train/validation split.

The default domain is Python source: about two hundred modules of the standard library (about 6 MB), one file per
document; "pydoc" is the interpreter's `help()` topics (about 0.5 MB of English prose). Both come from snapshots
shipped with the lab (taken from CPython 3.11.7, PSF licence), never from the running interpreter, whose files
change between releases and would change the corpus fingerprint every bundle records.
Any UTF-8 text can be used instead, cut at blank lines into documents of about DOCUMENT_CHARS (never fewer than
two): the split takes whole documents, so a model is never evaluated on characters it trained on.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import platform
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from core import i18n
from core.i18n import N_, _
from core.jsonfile import JsonFileError, read_json
from core.model.gpt import MAX_VOCAB
from core.model.tokenizer import SPECIAL_TOKENS

# Sorted paths relative to the stdlib directory, as snapshotted from CPython 3.11.7; none is among the modules
# 3.12 and 3.13 removed or turned into packages (so a snapshot can be taken again on those); all
# are pure Python (no shims re-exporting a C module) and ASCII but for a few names and quotes (shlex.py is left out: its
# Latin-1 word-character table would add 60 characters seen nowhere else).
STDLIB_MODULES: tuple[str, ...] = tuple(
    """
    _collections_abc.py _pyio.py _strptime.py _threading_local.py _weakrefset.py abc.py argparse.py ast.py
    asyncio/base_events.py asyncio/events.py asyncio/futures.py asyncio/locks.py asyncio/protocols.py
    asyncio/queues.py asyncio/selector_events.py asyncio/sslproto.py asyncio/streams.py asyncio/subprocess.py
    asyncio/tasks.py asyncio/transports.py asyncio/unix_events.py base64.py bdb.py bisect.py bz2.py calendar.py
    cmd.py code.py codecs.py codeop.py collections/__init__.py colorsys.py compileall.py
    concurrent/futures/_base.py concurrent/futures/process.py concurrent/futures/thread.py configparser.py
    contextlib.py copy.py copyreg.py csv.py ctypes/__init__.py ctypes/util.py dataclasses.py dbm/__init__.py
    dbm/dumb.py difflib.py dis.py doctest.py email/_header_value_parser.py email/_policybase.py
    email/base64mime.py email/charset.py email/contentmanager.py email/feedparser.py email/generator.py
    email/header.py email/headerregistry.py email/policy.py email/quoprimime.py email/utils.py
    encodings/__init__.py encodings/idna.py enum.py filecmp.py fileinput.py fnmatch.py fractions.py functools.py
    genericpath.py getopt.py getpass.py gettext.py glob.py graphlib.py gzip.py hashlib.py heapq.py hmac.py
    html/__init__.py html/parser.py http/client.py http/cookiejar.py http/cookies.py http/server.py imaplib.py
    importlib/__init__.py importlib/_bootstrap.py importlib/_bootstrap_external.py
    importlib/metadata/__init__.py inspect.py ipaddress.py json/__init__.py json/decoder.py json/encoder.py
    json/scanner.py json/tool.py keyword.py linecache.py locale.py logging/__init__.py logging/config.py
    logging/handlers.py lzma.py mailbox.py mimetypes.py modulefinder.py multiprocessing/connection.py
    multiprocessing/context.py multiprocessing/managers.py multiprocessing/pool.py multiprocessing/process.py
    multiprocessing/queues.py multiprocessing/synchronize.py multiprocessing/util.py netrc.py ntpath.py
    numbers.py opcode.py operator.py optparse.py os.py pdb.py pickle.py pickletools.py pkgutil.py platform.py
    plistlib.py poplib.py posixpath.py pprint.py profile.py pstats.py py_compile.py pyclbr.py pydoc.py queue.py
    quopri.py random.py re/__init__.py re/_compiler.py re/_constants.py re/_parser.py reprlib.py rlcompleter.py
    sched.py secrets.py selectors.py shelve.py shutil.py signal.py smtplib.py socket.py socketserver.py
    sqlite3/dump.py ssl.py stat.py statistics.py string.py stringprep.py subprocess.py symtable.py tabnanny.py
    tarfile.py tempfile.py textwrap.py threading.py timeit.py token.py tokenize.py tomllib/_parser.py
    tomllib/_re.py trace.py traceback.py tracemalloc.py types.py typing.py unittest/case.py unittest/loader.py
    unittest/main.py unittest/mock.py unittest/result.py unittest/runner.py unittest/suite.py urllib/request.py
    urllib/robotparser.py uuid.py warnings.py wave.py weakref.py webbrowser.py wsgiref/handlers.py
    wsgiref/headers.py wsgiref/simple_server.py wsgiref/util.py wsgiref/validate.py xml/dom/expatbuilder.py
    xml/dom/minidom.py xml/dom/pulldom.py xml/etree/ElementTree.py xml/sax/expatreader.py xml/sax/handler.py
    xml/sax/saxutils.py zipapp.py zoneinfo/_common.py zoneinfo/_tzpath.py zoneinfo/_zoneinfo.py
    """.split()
)
STDLIB_SOURCE = "stdlib"
# Prose of another kind, also on every Python: the language reference's topics that `help("if")` shows,
# shipped with the interpreter as pydoc_data/topics.py (English prose with grammar snippets), one per document.
PYDOC_SOURCE = "pydoc"
SNAPSHOT_DIR = Path(__file__).with_name("corpora")  # <source>.json.xz for each named corpus
SNAPSHOT_MAX_BYTES = 8 * 2**20  # a shipped snapshot is about 1.3 MB compressed; bound what is decompressed too
MAX_BYTES = 20 * 1024 * 1024  # larger files would take minutes to tokenise and hours to learn from
DOCUMENT_CHARS = 4000  # target size of one document cut from a plain text file
MIN_DOCUMENTS = 2  # one for training, one for validation
# Distinct characters a corpus may hold: the model's vocabulary limit less the special tokens. An upload of
# 70,005 distinct characters passed the upload check and failed after Start, when the model was built.
MAX_CHARACTERS = MAX_VOCAB - len(SPECIAL_TOKENS)
SHORT_TEXT_DOCUMENTS = 10  # a text shorter than 10 documents' worth is cut into about ten

_BLANK_LINE = re.compile(r"\n[ \t]*\n")  # a boundary between paragraphs


class CorpusError(ValueError):
    """A corpus cannot be used; the message says what was wrong and what to do."""


@dataclass(frozen=True)
class Document:
    """One unit of the train/validation split: a source file or a block of a text file."""

    name: str
    text: str


@dataclass(frozen=True)
class Corpus:
    """Documents in a fixed order, where they came from, and a fingerprint of their exact text."""

    documents: tuple[Document, ...]
    fingerprint: str
    source: str

    def __post_init__(self):
        if len(self.documents) < MIN_DOCUMENTS:
            raise CorpusError(
                _(
                    "a corpus needs at least {least} documents (one to validate on), got {got}; give it more text"
                ).format(least=MIN_DOCUMENTS, got=len(self.documents))
            )
        if fingerprint(self.documents) != self.fingerprint:
            raise CorpusError(
                "the corpus fingerprint does not match its documents; build a Corpus with "
                "load_corpus or corpus_from_text instead of by hand"
            )

    @property
    def text(self) -> str:
        """Every document's text, concatenated in order (the tokenizer's alphabet comes from this)."""
        return "".join(d.text for d in self.documents)

    @property
    def num_chars(self) -> int:
        return sum(len(d.text) for d in self.documents)


def fingerprint(documents: tuple[Document, ...] | list[Document]) -> str:
    """sha256 over the (name, text) pairs in order; each field is length-prefixed, so no two
    different corpora can hash the same bytes by moving text across a document boundary."""
    h = hashlib.sha256()
    for doc in documents:
        for field in (doc.name, doc.text):
            data = field.encode("utf-8")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
    return h.hexdigest()


def load_corpus(source: str | os.PathLike) -> Corpus:
    """The pinned standard-library corpus for "stdlib", the reference topics for "pydoc", otherwise the UTF-8
    text file at `source`.

    A file that happens to be called "stdlib" or "pydoc" is reached as "./stdlib" or "./pydoc".
    """
    if isinstance(source, str) and source == STDLIB_SOURCE:
        return load_snapshot(STDLIB_SOURCE)
    if isinstance(source, str) and source == PYDOC_SOURCE:
        return load_snapshot(PYDOC_SOURCE)
    path = Path(source)
    if not path.exists():
        raise CorpusError(
            f"corpus file {str(path)!r} does not exist; pass 'stdlib', 'pydoc' or the path of a UTF-8 text file"
        )
    if not path.is_file():
        raise CorpusError(
            f"corpus {str(path)!r} is not a regular file; pass 'stdlib', 'pydoc' or the path of a UTF-8 text file"
        )
    size = path.stat().st_size
    _check_size(size, str(path))
    return corpus_from_text(path.name, path.read_bytes(), source=str(path))


def corpus_from_text(name: str, text: str | bytes, *, source: str | None = None) -> Corpus:
    """A corpus from one text (an upload or a file's bytes), cut into documents at blank lines.

    `name` labels the documents ("name#0", "name#1", ...); `source` defaults to "upload:<name>".
    """
    if not isinstance(name, str) or not name:
        raise CorpusError(f"a corpus text needs a non-empty name, got {name!r}")
    if isinstance(text, (bytes, bytearray)):
        _check_size(len(text), name)
        text = _decode(bytes(text), name)
    elif isinstance(text, str):
        _check_size(len(text.encode("utf-8", errors="surrogatepass")), name)
    else:
        raise CorpusError(f"corpus text must be str or bytes, got {type(text).__name__}")
    text = _normalise(text)
    if not text.strip():
        raise CorpusError(
            _("{name} is empty (or only whitespace); choose a file with some text in it").format(name=repr(name))
        )
    _check_alphabet(text, name)
    pieces = split_text(text)
    if len(pieces) < MIN_DOCUMENTS:
        raise CorpusError(
            _(
                "{name} has only {count} character(s), too little for a training and a validation document; use a "
                "longer text"
            ).format(name=repr(name), count=len(text))
        )
    documents = tuple(Document(f"{name}#{i}", piece) for i, piece in enumerate(pieces))
    return Corpus(documents, fingerprint(documents), source if source is not None else f"upload:{name}")


def split_text(text: str, target: int = DOCUMENT_CHARS) -> list[str]:
    """Cut `text` into contiguous pieces of about `target` characters, preferring blank-line
    boundaries, then line ends. A text shorter than SHORT_TEXT_DOCUMENTS * target is cut into about ten
    pieces (so a 10% validation split stays possible); two or more characters always give two or more.
    "".join(split_text(text)) == text."""
    if target < 1:
        raise ValueError(f"target must be a positive number of characters, got {target}")
    n = len(text)
    target = max(1, min(target, n // SHORT_TEXT_DOCUMENTS))  # a short text still gives ~10 documents
    pieces, start = [], 0
    while n - start > target + target // 2:
        cut = _cut_point(text, start, target)
        pieces.append(text[start:cut])
        start = cut
    if start < n:
        if pieces and not text[start:].strip():  # trailing blank lines join the previous document
            pieces[-1] += text[start:]
        else:
            pieces.append(text[start:])
    return pieces


def split_documents(
    corpus: Corpus, val_fraction: float = 0.1, seed: int = 0
) -> tuple[tuple[Document, ...], tuple[Document, ...]]:
    """(train_docs, val_docs): whole documents, disjoint, each tuple in corpus order.

    round(val_fraction * n) documents (at least one, at most n - 1) are drawn for validation by a
    `random.Random(seed)` shuffle of the document indices, so the split depends only on the seed and
    the number of documents, never on their text.
    """
    if not isinstance(corpus, Corpus):
        raise TypeError(f"split_documents needs a Corpus, got {type(corpus).__name__}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    n = len(corpus.documents)
    n_val = min(n - 1, max(1, round(val_fraction * n)))
    order = list(range(n))
    random.Random(seed).shuffle(order)
    val_idx = set(order[:n_val])
    train = tuple(d for i, d in enumerate(corpus.documents) if i not in val_idx)
    val = tuple(d for i, d in enumerate(corpus.documents) if i in val_idx)
    return train, val


def check_split_size(train_chars: int, val_chars: int, context_length: int) -> None:
    """Raise CorpusError unless both token streams hold at least one training window.

    A window is context_length inputs plus one shifted target, so each stream needs context_length + 1
    tokens (characters plus the <eos> after each document).
    """
    need = context_length + 1
    for label, have in ((N_("training"), train_chars), (N_("validation"), val_chars)):
        if have < need:
            raise CorpusError(
                _(
                    "the corpus is too small for context length {context}: the {part} documents hold {have} tokens "
                    "and need at least {need}; use a longer text, a smaller val_fraction or a preset with a shorter "
                    "context"
                ).format(context=context_length, part=_(label), have=have, need=need)
            )


# ---- helpers -------------------------------------------------------------------------------------


def load_snapshot(source: str, folder: Path = SNAPSHOT_DIR) -> Corpus:
    """A named corpus from its shipped snapshot, refused unless its documents hash to the fingerprint it records."""
    path = folder / f"{source}.json.xz"
    try:
        with lzma.open(path, "rb") as f:
            raw = f.read(SNAPSHOT_MAX_BYTES * 4 + 1)  # 6 MB of text; never decompress without a bound
    except (OSError, lzma.LZMAError) as e:
        raise CorpusError(f"the shipped {source!r} corpus {str(path)!r} cannot be read ({e}); reinstall the lab") from e
    if len(raw) > SNAPSHOT_MAX_BYTES * 4:
        raise CorpusError(f"the shipped {source!r} corpus {str(path)!r} is larger than expected; reinstall the lab")
    try:
        data = read_json(raw, "the snapshot", max_bytes=SNAPSHOT_MAX_BYTES * 4)  # the bound the read above had
        documents = [Document(str(name), str(text)) for name, text in data["documents"]]
        recorded = str(data["fingerprint"])
    except (ValueError, KeyError, TypeError) as e:
        why = e.problem if isinstance(e, JsonFileError) else e
        raise CorpusError(f"the shipped {source!r} corpus {str(path)!r} is damaged ({why}); reinstall the lab") from e
    if fingerprint(documents) != recorded:
        raise CorpusError(
            f"the shipped {source!r} corpus {str(path)!r} does not match its fingerprint; reinstall the lab"
        )
    return Corpus(tuple(documents), recorded, source)


def interpreter_corpus(source: str) -> Corpus:
    """The named corpus as the running interpreter's own files give it (what a snapshot is taken from)."""
    if source == PYDOC_SOURCE:
        from pydoc_data.topics import topics

        pydoc = [Document(f"pydoc/{name}", _normalise(str(text))) for name, text in sorted(topics.items())]
        return Corpus(tuple(pydoc), fingerprint(pydoc), PYDOC_SOURCE)
    root = Path(sysconfig.get_paths()["stdlib"])
    documents = [Document(rel, _normalise(_decode((root / rel).read_bytes(), rel))) for rel in STDLIB_MODULES]
    return Corpus(tuple(documents), fingerprint(documents), STDLIB_SOURCE)


def write_snapshot(corpus: Corpus, folder: Path = SNAPSHOT_DIR) -> Path:
    """Write `corpus` as <source>.json.xz (documents in order, and their fingerprint)."""
    path = folder / f"{corpus.source}.json.xz"
    data = {
        "source": corpus.source,
        "fingerprint": corpus.fingerprint,
        "taken_from": f"CPython {platform.python_version()}",
        "documents": [[d.name, d.text] for d in corpus.documents],
    }
    with lzma.open(path, "wb", preset=9) as f:
        f.write(json.dumps(data, ensure_ascii=False).encode("utf-8"))
    return path


def _check_size(n_bytes: int, label: str) -> None:
    if n_bytes > MAX_BYTES:
        raise CorpusError(
            _("{name} is {size} bytes, more than the limit of {limit} ({mb} MB); use a smaller excerpt of it").format(
                name=repr(label), size=i18n.integer(n_bytes), limit=i18n.integer(MAX_BYTES), mb=MAX_BYTES // 2**20
            )
        )
    if n_bytes == 0:
        raise CorpusError(_("{name} is empty (0 bytes); choose a file with some text in it").format(name=repr(label)))


def _check_alphabet(text: str, label: str) -> None:
    """A character vocabulary holds every distinct character: refuse a text with more than MAX_CHARACTERS."""
    count = len(set(text))
    if count > MAX_CHARACTERS:
        raise CorpusError(
            _(
                "{name} holds {count} distinct characters, and a model's vocabulary takes at most {most} "
                "(core.model.gpt.MAX_VOCAB less {special} special tokens); use a text in fewer scripts, or an excerpt "
                "of it"
            ).format(
                name=repr(label),
                count=i18n.integer(count),
                most=i18n.integer(MAX_CHARACTERS),
                special=len(SPECIAL_TOKENS),
            )
        )


def _decode(data: bytes, label: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(
            _(
                "{name} is not UTF-8 text: byte {byte} at offset {offset} cannot be decoded; save the file as UTF-8 "
                "(or use a plain-text file)"
            ).format(name=repr(label), byte=f"0x{data[e.start]:02x}", offset=e.start)
        ) from None
    nul = text.find("\x00")  # valid UTF-8, but no text file holds a NUL: a binary file (or UTF-16 without a BOM)
    if nul >= 0:
        raise CorpusError(
            _(
                "{name} holds a NUL byte at offset {offset}: it looks like a binary file, not text; choose a "
                "plain-text file saved as UTF-8"
            ).format(name=repr(label), offset=nul)
        )
    return text


def _normalise(text: str) -> str:
    """Drop a leading byte-order mark and turn CRLF / CR line ends into LF."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _cut_point(text: str, start: int, target: int) -> int:
    """Where the document starting at `start` ends: the first blank-line boundary at or after
    start + target (within another target), else the first line end there, else a hard cut."""
    lo, hi = start + target, min(start + 2 * target, len(text) - 1)  # leave at least one character
    m = _BLANK_LINE.search(text, lo, hi)
    if m:
        return m.end()
    newline = text.find("\n", lo, hi)
    if newline != -1:
        return newline + 1
    return lo


def take_snapshots(folder: Path = SNAPSHOT_DIR) -> list[Path]:
    """Snapshot both named corpora from this interpreter; the shipped ones were taken on CPython 3.11.7 with
    `python -c "from core.model.corpus import take_snapshots; take_snapshots()"`."""
    return [write_snapshot(interpreter_corpus(name), folder) for name in (STDLIB_SOURCE, PYDOC_SOURCE)]
