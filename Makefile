PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
STAMP := $(VENV)/.installed
BENCHES := bench-memory bench-redis bench-postgres bench-executions bench-events bench-sqlite bench-worker

.PHONY: system-deps setup twins check-twins lint typecheck test test-pg-next pytest demo bench clean $(BENCHES)

setup: $(STAMP)

# System packages the tests need (faketime: a worker whose clock runs ahead).
system-deps:
	command -v faketime >/dev/null || (apt-get update -qq && apt-get install -y -qq faketime)

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
	$(BIN)/mypy src_async/runyard src_sync/runyard/_sync tests/_sync tests/support codegen

pytest: $(STAMP) system-deps
	$(BIN)/pytest -q

test: check-twins lint typecheck pytest

# The PostgreSQL tests again on the newest PostgreSQL, a throwaway server (.ci/run runs it).
test-pg-next: $(STAMP)
	PYTHON=$(PYTHON) .ci/pg-next

demo: $(STAMP)
	$(BIN)/runyard demo --flavour async
	$(BIN)/runyard demo --flavour sync

# Benchmarks print ratios against a baseline measured in the same run; they are not tests.
bench: $(BENCHES)

bench-memory: $(STAMP)
	$(PYTHON) -m benchmarks.bench_memory

bench-redis: $(STAMP)
	$(PYTHON) -m benchmarks.bench_redis

bench-postgres: $(STAMP)
	$(PYTHON) -m benchmarks.bench_postgres

bench-executions: $(STAMP)
	$(PYTHON) benchmarks/bench_executions.py

bench-events: $(STAMP)
	$(PYTHON) -m benchmarks.bench_events

bench-sqlite: $(STAMP)
	$(PYTHON) -m benchmarks.bench_sqlite

bench-worker: $(STAMP)
	$(PYTHON) -m benchmarks.bench_worker

clean:
	rm -rf $(VENV) build dist *.egg-info src_async/*.egg-info .cache
