"""core.model.init_from: a grown vocabulary keeps every base logit (rows mapped by character, not by id) and starts a
new character at the average logit, h . mean of the base's character rows (Hewitt 2021)."""

from pathlib import Path

import pytest
import torch

from core.agreement import allowance, float64_copy, model_terms
from core.model.bundle import Bundle
from core.model.gpt import GPT, preset
from core.model.init_from import extend_vocabulary, with_context_length
from core.model.tokenizer import SPECIAL_TOKENS, CharTokenizer

pytestmark = pytest.mark.numerics

BASE_TEXT = "abc xyz\n"
NEW_TEXT = "mam xa\n"  # "m" sorts between "c" and "x": the ids of x, y, z shift by one


def base_model() -> tuple[GPT, CharTokenizer]:
    tokenizer = CharTokenizer.from_text(BASE_TEXT)
    torch.manual_seed(0)
    model = GPT(preset("tiny", tokenizer.vocab_size)).eval()
    with torch.no_grad():  # rows far from the mean, so a row mapped by id (not by character) is off by whole units
        model.token_embedding.weight.normal_(0.0, 1.0)
    return model, tokenizer


def final_hidden(model: GPT, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (B, T, V), h (B, T, C): what the LM head reads)."""
    seen = {}
    hook = model.norm_final.register_forward_hook(lambda _m, _i, out: seen.update(h=out))
    try:
        with torch.no_grad():
            logits = model(idx).logits  # (B, T, V)
    finally:
        hook.remove()
    return logits, seen["h"]


def test_grown_model_keeps_every_base_logit_and_starts_a_new_character_at_the_mean_row():
    base, base_tok = base_model()
    base64 = float64_copy(base)
    grown64, tok = extend_vocabulary(base64, base_tok, NEW_TEXT)  # grown in float64: the mean row too
    assert tok.chars == tuple(sorted(set(BASE_TEXT) | set(NEW_TEXT)))
    assert grown64.lm_head.weight is grown64.token_embedding.weight  # still one tied table
    assert grown64.token_embedding.weight.dtype == torch.float64
    text = "ab xyz cab\nzy"  # base characters only
    logits_base, _ = final_hidden(base64, torch.tensor([base_tok.encode(text)]))  # (1, T, V_base)
    logits, h = final_hidden(grown64, torch.tensor([tok.encode(text)]))  # (1, T, V), (1, T, C)
    tol = allowance(torch.float64, model_terms(grown64.config), scale=float(logits_base.abs().max()))
    pieces = list(SPECIAL_TOKENS) + list(base_tok.chars)
    for old_id, piece in enumerate(pieces):  # by character: the grown id of each base piece
        new_id = old_id if old_id < len(SPECIAL_TOKENS) else tok.encode(piece)[0]
        torch.testing.assert_close(logits[..., new_id], logits_base[..., old_id], rtol=0, atol=tol)
    N = len(SPECIAL_TOKENS)
    mean_row = base64.token_embedding.weight[N:].mean(dim=0)  # (C,)
    m = tok.encode("m")[0]
    torch.testing.assert_close(logits[..., m], h @ mean_row, rtol=0, atol=tol)  # closed form
    torch.testing.assert_close(logits[..., m], logits_base[..., N:].mean(dim=-1), rtol=0, atol=tol)  # average logit
    assert base64.token_embedding.weight.shape[0] == base_tok.vocab_size  # the base is left as it was


def test_a_longer_context_gives_the_base_logits_where_the_base_can_read_and_reads_further():
    base, tok = base_model()
    base64 = float64_copy(base)
    bundle = Bundle(model=base64, tokenizer=tok, manifest={}, path=Path("base"))
    L = base64.config.context_length
    longer = with_context_length(bundle, 2 * L).model
    assert longer.config.context_length == 2 * L and base64.config.context_length == L  # the base is unchanged
    ids = torch.tensor([tok.encode((BASE_TEXT * 20)[: 2 * L])])  # (1, 2L)
    with torch.no_grad():
        logits_base = base64(ids[:, :L]).logits  # (1, L, V)
        logits = longer(ids).logits  # (1, 2L, V)
    tol = allowance(torch.float64, model_terms(longer.config), scale=float(logits_base.abs().max()))
    torch.testing.assert_close(logits[:, :L], logits_base, rtol=0, atol=tol)  # RoPE: the same rows, the same weights
    changed = ids.clone()
    changed[0, 0] = (ids[0, 0] + 1 - len(SPECIAL_TOKENS)) % len(tok.chars) + len(SPECIAL_TOKENS)  # another character
    with torch.no_grad():
        last = longer(changed).logits[0, -1]  # (V,): 2L - 1 tokens after the one changed
    assert (last - logits[0, -1]).abs().max() > 1e3 * tol  # the last row reads the first token, past the base's L
