# The two commands of the README: `make demo` (set up + main job) and `make test` (set up + tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_ROOT ?= ../shared/data
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench bench-gpu clean

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
	$(PY) -m pytest -q -n 2 --durations=25  # pytest-xdist: 2 workers (CI has 2 cores), one torch thread each

lint: setup
	$(VENV)/bin/ruff check contrastext tests bench

bench: setup  # long (about 1.5 h on 2 cores): run it on a quiet machine
	$(PY) bench/objectives.py --output BENCHMARKS.md
	$(PY) bench/train_simcse.py --data-root $(DATA_ROOT) --output BENCHMARKS.md
	$(PY) bench/encode.py --data-root $(DATA_ROOT) --output BENCHMARKS.md
	CONTRASTEXT_DATA=$(DATA_ROOT) $(PY) bench/grad_cache_memory.py --output BENCHMARKS.md
	$(PY) bench/reclaim_overhead.py --output BENCHMARKS.md
	$(PY) bench/ans_profile.py --data-root $(DATA_ROOT) --output BENCHMARKS.md

bench-gpu: setup  # on a CUDA GPU: the cuda tests and the benches into BENCHMARKS-cuda.md (see bench/gpu.sh --help)
	PYTHON=$(PY) bash bench/gpu.sh --data-root $(DATA_ROOT)

clean:
	rm -rf $(VENV) runs
