"""Attention Lab's library: attention you can check by hand and a decoder-only transformer built on it.

Shape legend, used in every shape comment of the project:
    B  batch                      H  heads
    T  query positions (new)      S  key positions (cache + new)
    D  head width (d_k)           C  model width (d_model)
    V  vocabulary size

Masks are bool with True = may attend, broadcastable to (B, H, T, S); with a cache the causal mask is
bottom-right aligned (query t sits at absolute position S - T + t). Never imports streamlit, never prints.
"""

# The lab's version, equal to pyproject.toml's (tests/kernel/test_version.py); `python -m core --version` prints it.
__version__ = "0.6.0"

from core.attention import AttentionResult, causal_mask, padding_mask, scaled_dot_product_attention, softmax
from core.model.bundle import Bundle, load_bundle, save_bundle, verify_bundle
from core.model.bundle_checks import BundleError
from core.model.corpus import Corpus, CorpusError, load_corpus
from core.model.engine import generate
from core.model.gpt import GPT, PRESETS, ModelConfig, preset
from core.model.kv_cache import KVCache
from core.model.sampling import SampleConfig, sample_next_token
from core.model.tokenizer import CharTokenizer
from core.model.train_config import TrainConfig
from core.model.training import train

__all__ = [
    "__version__",
    "AttentionResult",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax",
    "Bundle",
    "BundleError",
    "load_bundle",
    "save_bundle",
    "verify_bundle",
    "Corpus",
    "CorpusError",
    "load_corpus",
    "KVCache",
    "GPT",
    "PRESETS",
    "ModelConfig",
    "preset",
    "SampleConfig",
    "generate",
    "sample_next_token",
    "CharTokenizer",
    "TrainConfig",
    "train",
]
