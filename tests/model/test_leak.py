"""core.model.leak: the causality probe (every edited position, against a loop-by-loop oracle, on causal, maskless
and subtly leaking models), the leak rule over evaluations, and each loss-symptom rule at its boundary
(a loss exactly at a threshold passes), on hand-written histories; real runs against it are in
tests/model/test_runs.py. The probe's time on the shipped `default` preset is measured and stated in
core/model/leak.py."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch

import core.model.gpt
from core.agreement import allowance, float64_copy, model_terms
from core.attention import causal_mask
from core.model import leak
from core.model.corpus import corpus_from_text
from core.model.gpt import GPT, PRESETS
from core.model.train_config import TrainConfig
from core.model.training import train

V = 19
OLD_EDITS = lambda L: sorted({1, L // 4, L // 2, 3 * L // 4, L - 1})  # noqa: E731 - the old check's positions


def tiny(seed=0, **changes):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(PRESETS["tiny"], vocab_size=V, **changes)).eval()


def mod4_leaky_mask(T, S=None, *, device=None):
    """The causal mask, except that query t also sees key t + 1 whenever (t + 1) % 4 == 2."""
    mask = causal_mask(T, S, device=device).clone()  # (T, S)
    for t in range(T - 1):
        if (t + 1) % 4 == 2:
            mask[t, t + 1] = True
    return mask


@torch.no_grad()
def oracle(model, edits, *, sequences=2, seed=0):
    """The probe the slow way: one sequence and one edit at a time, every earlier position compared on its
    own. Returns (max change before the edit, first (j, t) beyond the allowance or None). It draws the same
    seeded sequences and edits as the probe, so the two must agree."""
    m = float64_copy(model)
    L = model.config.context_length
    g = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, V, (sequences, L), generator=g)
    shift = torch.randint(1, V, (sequences, L), generator=g)
    base = [m(seqs[n : n + 1], return_weights=True).logits[0] for n in range(sequences)]  # (T, V) each
    allowed = allowance(torch.float64, model_terms(model.config), scale=max(float(b.abs().max()) for b in base))
    largest, first = 0.0, None
    for j in edits:
        for n in range(sequences):
            edited = seqs[n : n + 1].clone()
            edited[0, j] = (edited[0, j] + shift[n, j]) % V
            assert edited[0, j] != seqs[n, j]
            out = m(edited, return_weights=True).logits[0]  # (T, V)
            for t in range(j):
                moved = float((out[t] - base[n][t]).abs().max())
                largest = max(largest, moved)
                if moved > allowed and (first is None or (j, t) < first):
                    first = (j, t)
    return largest, first


# ---- the probe -----------------------------------------------------------------------------------


@pytest.mark.numerics
def test_a_causal_model_passes_and_every_position_is_edited():
    model = tiny()
    probe = leak.causality_probe(model)
    L = model.config.context_length
    assert probe.passed and probe.first_leak is None
    assert probe.positions == tuple(range(1, L)) and probe.length == L and probe.sequences == 2
    assert probe.agreement.dtype == "float64" and probe.agreement.max_abs_diff <= probe.agreement.allowed
    assert probe.agreement.allowed == allowance(torch.float64, model_terms(model.config), scale=probe.agreement.scale)
    assert probe.max_change_after > 1e3 * probe.agreement.allowed  # the edits do move the later positions
    assert "causal" in probe.describe() and "LEAK" not in probe.describe()
    assert next(model.parameters()).dtype == torch.float32  # the probe ran on a copy


@pytest.mark.numerics
def test_a_briefly_trained_causal_model_passes():
    corpus = corpus_from_text("toy.py", "\n\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(60)))
    cfg = TrainConfig(batch_size=4, max_iters=15, warmup_iters=1, eval_interval=15, eval_iters=1, num_threads=1)
    result = train(PRESETS["tiny"], cfg, corpus)
    assert result.history[-1].val_loss < result.history[0].val_loss  # it did learn something
    probe = leak.causality_probe(result.model, sequences=1, seed=4)
    assert probe.passed and probe.first_leak is None and probe.max_change_after > 0


@pytest.mark.numerics
def test_a_model_without_the_mask_fails_at_the_first_edit_as_the_oracle_finds():
    model = tiny(causal=False)
    probe = leak.causality_probe(model)
    largest, first = oracle(model, range(1, model.config.context_length))
    assert not probe.passed and probe.first_leak == first == (1, 0)
    assert probe.agreement.max_abs_diff == pytest.approx(largest, rel=1e-9)
    assert probe.agreement.ratio > 1e6  # off by whole units, not by rounding
    assert "LEAK" in probe.describe() and "position 1" in probe.describe()


@pytest.mark.numerics
def test_a_mask_that_leaks_only_when_t_plus_1_is_2_mod_4_fails_though_the_old_edits_missed_it(monkeypatch):
    monkeypatch.setattr(core.model.gpt, "causal_mask", mod4_leaky_mask)
    model = tiny(seed=1)
    L = model.config.context_length
    # The old check edited 1, L/4, L/2, 3L/4, L-1 only: none is 2 mod 4, so it saw nothing.
    assert all(j % 4 != 2 for j in OLD_EDITS(L))
    old_largest, old_first = oracle(model, OLD_EDITS(L))
    assert old_first is None
    probe = leak.causality_probe(model)
    largest, first = oracle(model, range(1, L))
    assert not probe.passed and probe.first_leak == first == (2, 1)  # editing 2 moves position 1, the first leak
    assert probe.agreement.max_abs_diff == pytest.approx(largest, rel=1e-9)
    for sequences, seed in ((1, 0), (1, 7), (3, 2)):  # any seed, any number of sequences
        assert leak.causality_probe(model, sequences=sequences, seed=seed).first_leak == (2, 1)


def test_a_shorter_probe_and_a_non_finite_model():
    model = tiny()
    assert leak.causality_probe(model, length=5).positions == (1, 2, 3, 4)
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight[0, 0] = float("nan")
    probe = leak.causality_probe(model, sequences=1)
    assert not probe.passed  # NaN never agrees


def test_the_probe_leaves_the_global_rng_and_the_model_alone():
    model = tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(11)
    state = torch.get_rng_state()
    leak.causality_probe(model, sequences=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(sequences=0), "sequences"),
        (dict(sequences=leak.MAX_PROBE_SEQUENCES + 1), "sequences"),
        (dict(length=1), "length"),
        (dict(length=33), "context_length=32"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_probe_arguments_are_named(kwargs, words):
    with pytest.raises(ValueError, match=words):
        leak.causality_probe(tiny(), **kwargs)
    with pytest.raises(ValueError, match="GPT"):
        leak.causality_probe(torch.nn.Linear(2, 2))


# ---- the leak rule: a pure function over evaluations ---------------------------------------------


@pytest.mark.numerics
def test_the_leak_rule_returns_the_first_evaluation_whose_probe_failed():
    good, bad = leak.causality_probe(tiny(), sequences=1), leak.causality_probe(tiny(causal=False), sequences=1)
    records = [SimpleNamespace(step=s, probe=p) for s, p in ((30, bad), (0, good), (20, bad), (10, None))]
    assert leak.first_failed_probe(records).step == 20  # by step, whatever the order given
    assert leak.first_failed_probe([r for r in records if r.probe is not bad]) is None
    assert leak.first_failed_probe([SimpleNamespace(step=0, val_loss=1.0)]) is None  # not probed: no finding


# ---- the symptom: the loss rule ------------------------------------------------------------------


def history(*points):
    return [SimpleNamespace(step=s, val_loss=v) for s, v in points]


def test_the_floor_rule_at_its_boundary():
    floor = leak.LEAK_FLOOR_NATS
    assert not leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, floor))).leaked  # exactly at the floor passes
    verdict = leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, floor - 1e-9), (300, 0.1)))
    assert verdict.leaked and verdict.rule == "floor" and verdict.step == 200 and verdict.threshold == floor
    assert "impossibly good" in verdict.message


def test_the_reference_rule_compares_the_same_steps_only():
    ref = history((0, 4.5), (100, 2.4), (200, 2.2))
    assert not leak.leak_verdict(history((0, 4.5), (100, 1.2), (200, 1.5)), reference=ref).leaked  # 1.2 == 0.5 * 2.4
    verdict = leak.leak_verdict(history((0, 4.5), (100, 1.2 - 1e-9)), reference=ref)
    assert verdict.leaked and verdict.rule == "reference run" and verdict.step == 100
    assert verdict.threshold == pytest.approx(1.2)
    assert not leak.leak_verdict(history((0, 1.0), (150, 1.0)), reference=history((0, 4.5), (100, 2.4))).leaked
    assert not leak.leak_verdict(history((0, 2.0)), reference=history((0, 4.5))).leaked  # step 0 is never compared


def test_the_reference_model_rule_at_its_boundary():
    assert not leak.leak_verdict(history((0, 4.5), (400, 0.95)), reference_loss=1.9).leaked  # 0.95 == 0.5 * 1.9
    verdict = leak.leak_verdict(history((0, 4.5), (200, 1.2), (400, 0.95 - 1e-9)), reference_loss=1.9)
    assert verdict.leaked and verdict.rule == "reference model" and verdict.step == 400
    assert verdict.threshold == pytest.approx(0.95) and "shipped causal model" in verdict.message
