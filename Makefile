# Two commands on a fresh machine: `make demo` and `make test`.
# Each builds .venv and installs the project (with its dev extras) when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

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

unit: $(STAMP)
	$(PY) -m pytest

test: lint typecheck unit

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
