# Two commands for a fresh machine: `make run` serves the lab, `make test` runs every test. Both create .venv and
# install what they need; the work is done by lab.py (standard library only), so a machine without make can run
# `python lab.py run` / `python lab.py test` instead (Windows: `py lab.py run`).
PYTHON ?= python3
PORT ?= 8501
PY := .venv/bin/python

.PHONY: run class test lint bench clean messages-extract messages-update messages-compile

# One laptop: http://localhost:$(PORT), with the warm-up (python -m core serve).
run:
	$(PYTHON) lab.py run --port $(PORT)

# A class: LAB_TEACHER_PASSCODE must be set; WORKERS Streamlit processes (default: one per core) behind HAProxy on
# port $(PORT) of every network address; prints the address learners type.
class:
	$(PYTHON) lab.py class --port $(PORT) $(if $(WORKERS),--workers $(WORKERS))

# Every test, browser tests included; installs Debian's chromium, haproxy and postgresql when missing (as root).
test:
	$(PYTHON) lab.py test

# ruff (lint and format) and mypy, as pyproject.toml sets them; .ci/run runs this before the tests.
lint:
	$(PYTHON) lab.py lint

# Every benchmark, one after another (never two at once on a 2-core machine); each prints both sides of its ratios.
bench:
	$(PYTHON) lab.py setup --dev
	$(PY) bench/bench_generate.py
	$(PY) bench/bench_train.py
	$(PY) bench/bench_latency.py
	$(PY) bench/bench_monitoring.py
	$(PY) bench/bench_pages.py --modes warm,cold --before
	$(PY) bench/bench_browser.py --before
	$(PY) bench/bench_class.py --before
	$(PY) bench/bench_live_class.py

# The translation catalogs (core/i18n.py; README "Adding a language"): extract every _() string into
# locales/messages.pot, update each language's locales/<code>/LC_MESSAGES/messages.po from it, compile them to .mo.
BABEL := $(PY) -m babel.messages.frontend
messages-extract:
	$(PYTHON) lab.py setup
	$(BABEL) extract -F babel.cfg -w 120 --no-location --sort-output --project="Attention Lab" --copyright-holder="Attention Lab" -o locales/messages.pot .

messages-update: messages-extract
	$(BABEL) update -w 120 --no-fuzzy-matching --ignore-obsolete -i locales/messages.pot -d locales -D messages

messages-compile:
	$(PYTHON) lab.py setup
	$(PY) -c 'from core.i18n import compile_all; print(*compile_all(), sep=chr(10))'

clean:
	rm -rf .venv .venv-* .pytest_cache .hypothesis
