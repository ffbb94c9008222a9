# The two commands of the README, and what they need. Everything lands in .venv.
#   make sweep   set up, then run the smoke sweep (local Ray, SQLite results.db)
#   make test    set up (Python packages, PostgreSQL, Chromium), then the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?= --preset smoke

.PHONY: setup sweep test lint bench-db clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, alone: with the constraint it is the local CPU build, and nothing later replaces it.
$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -c constraints.txt torch
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	touch $@

# kernels.matmul's route key in C++ (kernels/route_key.py): without a compiler it keys in Python, slower
$(VENV)/.route_key: $(VENV)/.installed kernels/route_key.cpp
	$(BIN)/python -m kernels.route_key && touch $@ || true

setup: $(VENV)/.installed $(VENV)/.route_key

sweep: setup
	$(BIN)/farm sweep $(ARGS)

test: setup
	scripts/system-deps.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench-db: setup
	$(BIN)/python benchmarks/db_views.py --rows 1000000 --db /tmp/farm-bench.db

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
