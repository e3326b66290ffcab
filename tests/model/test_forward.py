"""core.model.forward: the next-token window (the context window with no room) and eval_mode, the one helper every
evaluation, generation and measurement of a model uses (the training flag restored, gradients as documented)."""

import pytest
import torch
from bundles import tiny_model

from core.model.architecture import architecture
from core.model.batches import evaluate_loss
from core.model.forward import eval_mode, next_token_logits, window
from core.model.sampling import SampleConfig, generate
from core.model.tokenizer import EOS_ID


def test_window_is_the_last_context_length_ids_or_eos():
    model, _ = tiny_model()
    L = model.config.context_length  # 32
    ids = [4 + i % 5 for i in range(50)]
    assert window(model, ids) == ids[50 - L :] and len(window(model, ids)) == 32
    assert window(model, ids[:7]) == ids[:7]
    assert window(model, []) == [EOS_ID]
    with pytest.raises(ValueError, match="ids must lie"):
        window(model, [model.config.vocab_size])


@pytest.mark.numerics
def test_next_token_logits_read_the_window_only():
    model, _ = tiny_model()
    ids = [4 + i % 5 for i in range(50)]
    with torch.no_grad():
        reference = model(torch.tensor([ids[-32:]])).logits[0, -1]  # (V,) the last 32 by hand, no cache
    torch.testing.assert_close(next_token_logits(model, ids), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("no_grad", [True, False])
def test_eval_mode_restores_the_training_flag_even_after_an_error(no_grad):
    model, _ = tiny_model()
    model.train()
    with pytest.raises(RuntimeError, match="inside"):
        with eval_mode(model, no_grad=no_grad):
            assert not model.training and torch.is_grad_enabled() is not no_grad
            raise RuntimeError("inside")
    assert model.training and torch.is_grad_enabled()
    model.eval()
    with eval_mode(model):
        pass
    assert not model.training  # restored to eval, not forced to train


def test_every_user_of_eval_mode_leaves_the_model_as_it_found_it():
    model, _ = tiny_model()
    model.train()
    architecture(model, 4)
    assert model.training and torch.is_grad_enabled()
    stream = torch.arange(4, 9).repeat(20)  # (100,)
    evaluate_loss(model, stream, batch_size=2, iters=2, seed=0)
    assert model.training and torch.is_grad_enabled()
    steps = generate(model, [4], SampleConfig(temperature=0.0, max_new_tokens=3))
    for _ in steps:
        assert not model.training and torch.is_grad_enabled()  # eval for the whole generation, autograd kept
    assert model.training
