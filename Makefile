# Two commands for a fresh machine: `make run` serves the lab, `make test` runs every test.
# Both create .venv and install what they need; `make test` also makes Chromium available.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: run test lint bench clean chromium

$(VENV)/.runtime: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11 or newer is needed, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.runtime
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

# Playwright's own browser download cannot work offline; the tests drive Debian's Chromium.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing Debian's chromium for the browser tests..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "error: the browser tests need Chromium. Install it (Debian/Ubuntu: sudo apt-get install chromium) and run make test again."; \
		exit 1; \
	fi

# The warm-up command waits for the lab to answer, then opens it once: the server computes every lab page's default
# view before the first learner arrives (ui/warmup.py).
run: $(VENV)/.runtime
	$(PY) -m ui.warmup --url http://localhost:$(PORT) & \
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.address localhost

test: $(VENV)/.dev chromium
	$(PY) -m pytest

# ruff (lint and format) and mypy, as pyproject.toml sets them; .ci/run runs this before the tests.
lint: $(VENV)/.dev
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# Every benchmark, one after another (never two at once on a 2-core machine); each prints both sides of its ratios.
bench: $(VENV)/.dev chromium
	$(PY) bench/bench_generate.py
	$(PY) bench/bench_train.py
	$(PY) bench/bench_latency.py
	$(PY) bench/bench_monitoring.py
	$(PY) bench/bench_pages.py
	$(PY) bench/bench_browser.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
