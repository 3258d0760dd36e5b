# The two commands of the README: `make demo` (set up + main job) and `make test` (set up + tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_ROOT ?= ../shared/data
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/contrastext demo --data-root $(DATA_ROOT) --output runs/demo

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check contrastext tests bench

bench: setup
	$(PY) bench/objectives.py --output BENCHMARKS.md

clean:
	rm -rf $(VENV) runs
