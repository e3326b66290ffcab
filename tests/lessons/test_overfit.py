"""core.lessons.overfit: one small batch memorised (loss near zero) while the held-out loss does not follow."""

import math

import pytest
import torch

from core.lessons.overfit import MAX_STEPS, NEAR_ZERO, overfit_tiny_batch
from core.model.gpt import preset

V = 20


def streams():
    g = torch.Generator().manual_seed(0)
    return torch.randint(4, V, (4000,), generator=g), torch.randint(4, V, (4000,), generator=g)


@pytest.mark.numerics
def test_one_batch_is_memorised_and_the_held_out_loss_stays_high():
    train, val = streams()  # random tokens: nothing general to learn, so held-out cannot improve much
    result = overfit_tiny_batch(preset("tiny", V), train, val, batch_size=2, steps=300, seed=0)
    assert result.batch_loss[0] == pytest.approx(math.log(V), abs=0.5)  # starts near uniform
    assert result.reached is not None and result.batch_loss[result.reached] < NEAR_ZERO
    assert result.held_out_loss[-1] > math.log(V - 4) - 0.2  # no better than uniform over the 16 drawn ids
    assert result.gap > 2.0
    assert len(result.steps) == len(result.batch_loss) == len(result.held_out_loss) == 301


def test_the_steps_are_bounded_before_the_loop():
    train, val = streams()
    with pytest.raises(ValueError, match="steps must be"):
        overfit_tiny_batch(preset("tiny", V), train, val, steps=MAX_STEPS + 1)


@pytest.mark.numerics
def test_on_the_stdlib_corpus_the_batch_is_memorised_and_the_held_out_text_is_not():
    from core.lessons.overfit import overfit_on_corpus
    from core.model.corpus import load_corpus

    result = overfit_on_corpus(load_corpus("stdlib"), steps=250, seed=0)
    assert result.reached is not None  # two windows of 32 characters, memorised
    assert result.held_out_loss[-1] > result.held_out_loss[0] - 1.5  # held out barely moves (or rises)
    assert result.gap > 1.0
