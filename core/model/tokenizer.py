"""A character-level tokenizer: one id per Unicode code point of the training corpus, after four special tokens
(0 <pad>, 1 <bos>, 2 <eos>, 3 <unk>).

`encode` never raises on a `str`: an unseen character becomes <unk>, and `unknown_chars` says which. A character
is a code point, so a base letter plus a combining mark is two tokens; normalise (NFC) before training and encoding
if that matters for a corpus. The vocabulary is stored in the bundle with its hash, so a bundle can refuse a
tokenizer it was not trained with.
"""

from __future__ import annotations

import hashlib
import json
import operator
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
FORMAT = "attention-lab/char-tokenizer"
FORMAT_VERSION = 1
MAX_CHARS = 0x110000  # Unicode's code points: a longer list must repeat one
MAX_SHOWN_DUPLICATES = 20  # duplicates named in the error

# Glyphs that make whitespace visible in token tables (the piece itself stays the real character).
# Glyphs that common fonts carry (DejaVu, Liberation, Noto): U+2420 "␠" is missing from most of them and
# showed as an empty box in charts and tables.
WHITESPACE_GLYPHS: dict[str, str] = {"\n": "↵", " ": "␣", "\t": "→", "\r": "←"}
# Shown instead of <unk> by decode(skip_special=True): the text keeps a mark where a character was lost.
REPLACEMENT_CHAR = "\ufffd"


class CharTokenizer:
    """Maps text to ids and back, one character per token. Immutable once built."""

    def __init__(self, chars: Sequence[str]):
        # Every check is linear and the sizes come first: a manifest can list 900,000 entries, and counting each
        # entry's duplicates with list.count took minutes before anything was refused.
        chars = list(chars)
        if not chars:
            raise ValueError("the vocabulary needs at least one character besides the special tokens")
        if len(chars) > MAX_CHARS:
            raise ValueError(
                f"the vocabulary lists {len(chars):,} characters; Unicode has {MAX_CHARS:,} code points, so it "
                "cannot list each once"
            )
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(f"every vocabulary entry must be a single character, got {c!r}"[:200])
        counts = Counter(chars)
        if len(counts) != len(chars):
            duplicates = sorted(c for c, n in counts.items() if n > 1)
            shown = "".join(duplicates[:MAX_SHOWN_DUPLICATES])
            more = (
                f" and {len(duplicates) - MAX_SHOWN_DUPLICATES:,} more"
                if len(duplicates) > MAX_SHOWN_DUPLICATES
                else ""
            )
            raise ValueError(f"vocabulary characters must be unique, got duplicates {list(shown)!r}{more}")
        if any(a > b for a, b in zip(chars, chars[1:])):
            raise ValueError("vocabulary characters must be sorted by code point")
        self._chars: tuple[str, ...] = tuple(chars)
        self._pieces: tuple[str, ...] = SPECIAL_TOKENS + self._chars
        self._char_to_id: dict[str, int] = {c: i + len(SPECIAL_TOKENS) for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The vocabulary of `text`: every distinct character, sorted."""
        if not isinstance(text, str):
            raise TypeError(f"from_text needs a str, got {type(text).__name__}")
        if not text:
            raise ValueError("from_text needs a non-empty corpus, got an empty string")
        return cls(sorted(set(text)))

    # ---- sizes and pieces ------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """V: special tokens plus corpus characters."""
        return len(self._pieces)

    @property
    def chars(self) -> tuple[str, ...]:
        """The corpus characters, in id order (ids 4, 5, ...)."""
        return self._chars

    @property
    def pieces(self) -> list[str]:
        """id -> piece: special tokens by name, characters as themselves."""
        return list(self._pieces)

    def display_piece(self, token_id: int) -> str:
        """The piece of `token_id` made visible for a table: ' ' -> '␣', '\\n' -> '↵', '\\t' -> '→'.

        Special tokens keep their names; other invisible characters (controls, format characters,
        other spaces) show as their code point, e.g. 'U+00A0'.
        """
        piece = self._pieces[self._check_id(token_id)]
        if token_id < len(SPECIAL_TOKENS):
            return piece
        if piece in WHITESPACE_GLYPHS:
            return WHITESPACE_GLYPHS[piece]
        if unicodedata.category(piece) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"):
            return f"U+{ord(piece):04X}"
        return piece

    # ---- encode / decode -------------------------------------------------------------------------

    def encode(self, s: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Ids of the characters of `s`; unseen characters become <unk> (never raises on a str)."""
        if not isinstance(s, str):
            raise TypeError(f"encode needs a str, got {type(s).__name__}")
        ids = [self._char_to_id.get(c, UNK_ID) for c in s]
        if add_bos:
            ids.insert(0, BOS_ID)
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        """Text of `ids`. decode(encode(s)) == s whenever every character of s is in the vocabulary.

        skip_special=True drops <pad>, <bos> and <eos> and shows <unk> as U+FFFD ('�') so a lost
        character stays visible; skip_special=False writes every special token by name.
        """
        parts = []
        for token_id in ids:
            i = self._check_id(token_id)
            if i >= len(SPECIAL_TOKENS) or not skip_special:
                parts.append(self._pieces[i])
            elif i == UNK_ID:
                parts.append(REPLACEMENT_CHAR)
        return "".join(parts)

    def unknown_chars(self, s: str) -> list[str]:
        """The distinct characters of `s` outside the vocabulary, in order of first appearance."""
        if not isinstance(s, str):
            raise TypeError(f"unknown_chars needs a str, got {type(s).__name__}")
        return list(dict.fromkeys(c for c in s if c not in self._char_to_id))

    # ---- persistence -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description from which `from_dict` rebuilds the same tokenizer."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "special_tokens": list(SPECIAL_TOKENS),
            "chars": list(self._chars),
        }

    @classmethod
    def from_dict(cls, d: Any) -> CharTokenizer:
        """Rebuild from `to_dict()` output; raises ValueError naming what is wrong with a malformed dict."""
        if not isinstance(d, dict):
            raise ValueError(f"tokenizer description must be a dict, got {type(d).__name__}")
        expected = {"format", "version", "special_tokens", "chars"}
        if set(d) != expected:
            raise ValueError(f"tokenizer description needs exactly the keys {sorted(expected)}, got {sorted(d)}")
        if d["format"] != FORMAT:
            raise ValueError(f"tokenizer format must be {FORMAT!r}, got {d['format']!r}")
        if d["version"] != FORMAT_VERSION or isinstance(d["version"], bool):
            raise ValueError(f"tokenizer format version must be {FORMAT_VERSION}, got {d['version']!r}")
        if d["special_tokens"] != list(SPECIAL_TOKENS):
            raise ValueError(f"special_tokens must be {list(SPECIAL_TOKENS)}, got {d['special_tokens']!r}")
        if not isinstance(d["chars"], list):
            raise ValueError(f"chars must be a list of single characters, got {type(d['chars']).__name__}")
        return cls(d["chars"])

    @property
    def content_hash(self) -> str:
        """sha256 hex digest of the canonical JSON of `to_dict()` (sorted keys, no spaces, ASCII escapes)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    # ---- helpers ---------------------------------------------------------------------------------

    def _check_id(self, token_id: Any) -> int:
        if isinstance(token_id, bool):
            raise ValueError(f"token ids must be integers, got {token_id!r}")
        try:
            i = operator.index(token_id)
        except TypeError:
            raise ValueError(f"token ids must be integers, got {token_id!r}") from None
        if not 0 <= i < self.vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary 0..{self.vocab_size - 1}")
        return i

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self._chars == other._chars

    def __hash__(self) -> int:
        return hash(self._chars)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, hash={self.content_hash[:12]})"
