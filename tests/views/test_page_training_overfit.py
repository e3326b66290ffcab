"""The Training page's tiny-batch overfit: predict first, then the lab's own run reveals both losses."""

import pytest

from core.lessons.overfit import overfit_on_corpus
from core.model.corpus import load_corpus
from tests.apptest import open_page, table

pytestmark = pytest.mark.numerics

STEPS = 100


@pytest.mark.parametrize(
    "prediction, right", [("it stays high, or rises", True), ("it falls with it, towards zero", False)]
)
def test_the_prediction_is_graded_and_the_revealed_losses_are_cores(prediction, right):
    at = open_page("training")
    assert at.button(key="overfit_run").disabled  # nothing is revealed before a prediction
    at.radio(key="overfit_prediction").set_value(prediction).run()
    at.slider(key="overfit_steps").set_value(STEPS).run()
    at.button(key="overfit_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    want = overfit_on_corpus(load_corpus("stdlib"), steps=STEPS, seed=0)
    boxes = at.success if right else at.error
    message = next(b.value for b in boxes if "held-out loss went from" in b.value)
    assert message.startswith("Your prediction matches" if right else "Not what the lab measures")
    assert f"to {want.batch_loss[-1]:.3f} nats" in message and f"to {want.held_out_loss[-1]:.2f}." in message
    shown = table(at, "held-out loss")
    assert shown["step"].iloc[-1] == STEPS
    assert shown["batch loss"].iloc[-1] == pytest.approx(want.batch_loss[-1], abs=1e-4)
