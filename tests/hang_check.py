"""A hang detector for the hostile-file tests: a call that would block (a FIFO, a lock it can never take) fails the
test instead of hanging the run. Not a timing check: each call it runs takes well under a second."""

import threading


def finishes(call, *args, **kwargs):
    """call(...) run in a thread: its result, or the exception it raised; the test fails if it has not returned in
    a minute."""
    out: list = []

    def run():
        try:
            out.append(call(*args, **kwargs))
        except Exception as e:  # the test looks at what was raised
            out.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert out, f"{call.__name__} blocked"
    return out[0]
