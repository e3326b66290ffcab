"""Follow a suggestion through the code: from the Autocomplete page's text to the suggestion it shows (issue 27).

    walk(text)   the calls a new text on the Autocomplete page makes to serve its suggestion, traced

A learner types `text`; the page's run is traced (threading.setprofile: AppTest runs the script in a thread) and two
things are read off it:

- `wings`: the call stack at the model's first forward pass made for the suggestion (a frame in ui/suggestion_view.py
  on the stack), each frame named by its wing (ui and views count as one, "ui"; core/*.py is the kernel), runs of
  the same wing collapsed. The issue's walk was ui -> release -> ui -> telemetry -> release -> model -> ...
- `encodes`: how many times the run encoded the prompt, counted as calls of CharTokenizer.encode whose text ends
  with the typed text or is its end (the suggestion's own text, encoded to draw it, is not the prompt).
- `cuts`: how many times the prompt was cut to its window on the way to the suggestion, counted as calls of
  window_start made while the page encodes the text (page_prompt) or serves its suggestion (offer) (issue 36: the
  predictor cut it a second time).

Run as a script it prints both for a short and a long text: `python -m tests.suggestion_walk`.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wing_of(filename: str) -> str | None:
    """The wing of a first-party source file, None for anything else."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = rel.parts
    if parts[0] in ("ui", "views") or rel.name == "app.py":
        return "ui"
    if parts[0] == "core":
        return parts[1] if len(parts) > 2 else "kernel"
    return None


@dataclass(frozen=True)
class Walk:
    wings: tuple[str, ...]  # the stack at the suggestion's first forward pass, one entry per run of one wing
    frames: tuple[str, ...]  # that stack, "file:function", outermost first (first-party frames only)
    encoders: tuple[str, ...]  # each encoding of the prompt in the run: its three callers, innermost first
    cutters: tuple[str, ...] = ()  # each cut of the prompt to its window for the suggestion: its three callers

    @property
    def cuts(self) -> int:
        return len(self.cutters)

    @property
    def encodes(self) -> int:
        return len(self.encoders)

    @property
    def hops(self) -> int:
        return len(self.wings) - 1

    @property
    def distinct(self) -> int:
        return len(set(self.wings))


def walk(text: str) -> Walk:
    """Open the Autocomplete page, then type `text`, and trace that run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("views/autocomplete.py").run()
    stack_at_forward: list[tuple[str, str]] | None = None
    encoders: list[str] = []
    cutters: list[str] = []
    view = str(ROOT / "ui" / "suggestion_view.py")
    serving = {(view, "page_prompt"), (view, "offer")}  # the page's encoding of the text and its suggestion

    def first_party_stack(frame) -> list[tuple[str, str]]:
        out = []
        while frame is not None:
            if wing_of(frame.f_code.co_filename) is not None:
                out.append((frame.f_code.co_filename, frame.f_code.co_name))
            frame = frame.f_back
        return out[::-1]

    def profile(frame, event, arg):
        nonlocal stack_at_forward
        if event != "call":
            return
        code = frame.f_code
        name, filename = code.co_name, code.co_filename
        if name == "forward" and filename.endswith(str(Path("core", "model", "gpt.py"))):
            if stack_at_forward is None:
                stack = first_party_stack(frame)
                if any(f == view for f, _ in stack):
                    stack_at_forward = stack
        elif name == "window_start" and wing_of(filename) is not None:
            stack = first_party_stack(frame)
            if serving & set(stack):
                cutters.append(" < ".join(f"{Path(f).name}:{n}" for f, n in stack[::-1][1:4]))
        elif name == "encode" and filename.endswith(str(Path("core", "model", "tokenizer.py"))):
            arg_text = frame.f_locals.get("s")
            if isinstance(arg_text, str) and arg_text and (arg_text.endswith(text) or text.endswith(arg_text)):
                encoders.append(" < ".join(f"{Path(f).name}:{n}" for f, n in first_party_stack(frame)[::-1][1:4]))

    at.text_area(key="ac_prompt").set_value(text)
    threading.setprofile(profile)  # AppTest runs the script in a thread of its own, started by this run
    sys.setprofile(profile)
    try:
        at.run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert not at.exception, [e.value for e in at.exception]
    assert stack_at_forward is not None, "no forward pass under ui/suggestion_view.py"
    wings: list[str] = []
    for filename, _ in stack_at_forward:
        w = wing_of(filename)
        assert w is not None
        if not wings or wings[-1] != w:
            wings.append(w)
    frames = tuple(f"{Path(f).resolve().relative_to(ROOT)}:{n}" for f, n in stack_at_forward)
    return Walk(tuple(wings), frames, tuple(encoders), tuple(cutters))


if __name__ == "__main__":
    for typed in ("def parse(", "x = compute_total(items)\n" * 6):
        w = walk(typed)
        print(
            f"text of {len(typed)} characters: {w.hops} hops through {w.distinct} wings, prompt encoded {w.encodes}x, "
            f"cut to its window {w.cuts}x"
        )
        print("  wings:", " -> ".join(w.wings))
        for f in w.frames:
            print("   ", f)
        for e in w.encoders:
            print("  encoded by", e)
        for c in w.cutters:
            print("  cut by", c)
