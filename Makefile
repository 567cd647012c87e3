# The commands a person types. Each one installs what it needs on a fresh clone:
# uv (where uv's own installer puts it, when it is not on PATH) and the workspace
# virtualenv (.venv/).

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python must keep compiled bytecode: with PYTHONDONTWRITEBYTECODE set (some CI
# images and shells set it) every process compiles every module it imports from
# source again, which doubled the start of each service and agent (gateway 3.3 s
# of CPU to import, 1.7 s from bytecode) and the suite starts a hundred of them.
# The workspace's own modules write __pycache__/ on first import (git ignores it);
# the installed packages are compiled once by `uv sync --compile-bytecode`.
unexport PYTHONDONTWRITEBYTECODE

# uv: the one on PATH, else the one in UV_BIN_DIR, where uv's own installer puts it
# (UV_INSTALL_DIR, XDG_BIN_HOME, $XDG_DATA_HOME/../bin, else ~/.local/bin), else the
# .tools/bin fallback. `make uv` (run by every target) installs it when none is found
# and says so once: .ci/install-uv.sh. Expanded when used (=, not :=), so a recipe
# that runs after the install sees it.
UV_BIN_DIR ?= $(or $(UV_INSTALL_DIR),$(XDG_BIN_HOME),$(if $(XDG_DATA_HOME),$(XDG_DATA_HOME)/../bin),$(HOME)/.local/bin)
UV = $(firstword $(shell command -v uv 2>/dev/null) $(wildcard $(UV_BIN_DIR)/uv $(CURDIR)/.tools/bin/uv) uv)
PYTEST_ARGS ?=
# Test workers (pytest-xdist). The tests mostly wait on the broker, Postgres and
# processes, so more workers than cores pay: twice the cores, at least 4.
# `make test TEST_WORKERS=1` runs in one process (no xdist), `=0` too.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); w=$$((n * 2)); [ $$w -lt 4 ] && w=4; echo $$w)
PYTEST_PARALLEL := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)
BENCH_ARGS ?=
FUZZ_ARGS ?=
# Where `make dist` puts the wheels and sdists.
DIST ?= dist

PYPROJECTS := pyproject.toml $(wildcard libs/*/pyproject.toml services/*/pyproject.toml)

.PHONY: help uv bootstrap dist browser dev test test-unit test-integration properties fuzz lint format bench bench-quick bench-detail soak demo compose-up compose-down k8s-check

help: ## list the commands
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

uv: ## install uv where uv's installer puts it (~/.local/bin) when none is found
	@UV_BIN_DIR="$(UV_BIN_DIR)" .ci/install-uv.sh

.venv/.synced: uv.lock $(PYPROJECTS) VERSION | uv
	$(UV) sync --locked --compile-bytecode
	@touch $@

bootstrap: .venv/.synced ## install uv and the workspace (done by every target)

dist: uv ## a wheel and an sdist of each of the seven packages into dist/ (version: VERSION)
	@rm -f $(DIST)/disco_*.whl $(DIST)/disco_*.tar.gz
	$(UV) build --all-packages --out-dir $(DIST)

browser: ## Debian's chromium for the console's browser tests (the tests install it too when root)
	@test -x /usr/bin/chromium || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

dev: bootstrap ## run the whole stack locally (embedded Postgres + Kafka); Ctrl-C stops it
	$(UV) run disco dev up

test: bootstrap ## the whole suite, in parallel (TEST_WORKERS, default twice the cores, at least 4)
	$(UV) run pytest $(PYTEST_PARALLEL) --durations=25 $(PYTEST_ARGS)

test-unit: bootstrap ## the unit tests only: seconds, no broker, no Postgres, no services
	$(UV) run pytest --unit $(PYTEST_ARGS)

test-integration: bootstrap ## the integration and end-to-end tests (real broker and Postgres)
	$(UV) run pytest -m integration $(PYTEST_PARALLEL) --durations=25 $(PYTEST_ARGS)

properties: bootstrap ## the property tests (Hypothesis) with every example (make test runs a fifth)
	DISCO_PROPERTY_SCALE=1 $(UV) run pytest --unit -m hypothesis $(PYTEST_ARGS)

fuzz: bootstrap ## schemathesis over every service's OpenAPI on real processes (FUZZ_ARGS=--max-examples N ...)
	$(UV) run python -m tests.fuzz $(FUZZ_ARGS)

lint: bootstrap ## ruff (lint + format check) and mypy
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy libs/common/src libs/sdk/src libs/service-kit/src services/registry/src services/memory/src services/tracker/src services/gateway/src examples

format: bootstrap ## apply ruff's fixes and formatting
	$(UV) run ruff check --fix .
	$(UV) run ruff format .

# The benchmarks also time FastStream, the peer a Python developer would pick instead:
# the `bench` dependency group, which `make test` does not need (`uv run --group bench`
# adds it to the virtualenv; a later plain `uv sync` takes it out again).
BENCH_RUN := $(UV) run --locked --group bench

bench: bootstrap ## every hot path beside its raw baseline and FastStream, one table (BENCH_ARGS=--quick)
	$(BENCH_RUN) python bench/table.py $(BENCH_ARGS)

bench-quick: bootstrap ## the same table with small counts, in a few minutes
	$(BENCH_RUN) python bench/table.py --quick $(BENCH_ARGS)

bench-detail: bootstrap ## each area's own benchmark script, with its detailed figures
	@for script in bench/[!_]*.py; do \
		[ "$$script" = bench/table.py ] && continue; \
		echo "== $$script"; \
		$(BENCH_RUN) python $$script $(BENCH_ARGS) || exit 1; \
	done

SOAK_MINUTES ?= 30
soak: bootstrap ## a benchmark, not CI: SOAK_MINUTES (30) of mixed load under chaos, then the kill -9 campaign at 1,000 requests
	SOAK_MINUTES=$(SOAK_MINUTES) $(UV) run python bench/soak.py
	DISCO_KILL_CAMPAIGN_REQUESTS=1000 $(UV) run pytest tests/e2e/test_kill_campaign.py -s -p no:randomly --timeout=0

demo: bootstrap ## run an example end to end against a running stack (`make dev` in another terminal)
	$(UV) run python examples/demo.py

k8s-check: bootstrap ## render every deploy/k8s overlay and validate it offline (installs kubectl, kubernetes-validate)
	UV=$(UV) deploy/k8s/check.sh

compose-up: ## run the stack in Docker: Apache Kafka, pgvector Postgres, the four services
	docker compose up --build --detach --wait

compose-down: ## stop the Docker stack
	docker compose down --volumes
