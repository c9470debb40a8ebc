PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
STAMP := $(VENV)/.installed
BENCHES ?= $(filter bench-%,$(shell sed -n 's/^\(bench-[a-z]*\):.*/\1/p' Makefile))

.PHONY: setup twins check-twins lint typecheck test pytest demo bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip "setuptools>=77"
	$(PYTHON) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

twins: $(STAMP)
	$(PYTHON) -m codegen

check-twins: $(STAMP)
	$(PYTHON) -m codegen --check

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy src_async/runyard src_sync/runyard/_sync

pytest: $(STAMP)
	$(BIN)/pytest -q

test: check-twins lint typecheck pytest

bench-postgres: $(STAMP)
	$(PYTHON) benchmarks/bench_postgres.py

demo: $(STAMP)
	$(BIN)/runyard demo --flavour async
	$(BIN)/runyard demo --flavour sync

# Benchmarks print ratios against a baseline measured in the same run; they are not tests.
bench: $(STAMP)
	$(MAKE) --no-print-directory $(BENCHES)

bench-memory: $(STAMP)
	$(PYTHON) -m benchmarks.bench_memory

clean:
	rm -rf $(VENV) build dist *.egg-info src_async/*.egg-info

.PHONY: bench-redis
bench-redis: $(STAMP)
	$(PYTHON) benchmarks/bench_redis.py

.PHONY: bench-executions
bench-executions: $(STAMP)
	$(PYTHON) benchmarks/bench_executions.py
