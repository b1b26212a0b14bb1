# Two entry points: `make run` serves the webhook on loopback, `make test` runs every test.
# Both create ./.venv and install the pinned requirements on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m webhook serve

test: $(VENV)/.installed
	$(PY) -m pytest -q
