# Quick start: `make demo` (set up + run the loop on the demo model), `make test` (set up + tests).
VENV ?= .venv
OUT ?= demo-out
PY := $(VENV)/bin/python

.PHONY: setup demo test unit lint adapter-bench clean

setup:
	bash scripts/setup.sh $(VENV)

demo: setup
	$(VENV)/bin/tritonlab demo --out $(OUT)

test: setup
	$(PY) -m pytest tests

unit: setup
	$(PY) -m pytest tests/unit

lint: setup
	$(PY) -m ruff check src tests
	$(PY) -m ruff format --check src tests
	$(PY) -m mypy src

clean:
	rm -rf $(OUT) .pytest_cache .mypy_cache .ruff_cache
