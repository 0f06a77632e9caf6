# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Test processes (pytest-xdist): most tests wait on sockets and subprocesses, so two workers
# halve the suite's time on CI's 2 cores. `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 2

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'  # spark: ~60 s the first time (pip builds pyspark)
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/feds demo

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS)

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) benchmarks/dataspace.py
	$(PY) benchmarks/overlay.py

clean:
	rm -rf $(VENV) build *.egg-info
