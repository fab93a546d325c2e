# Two commands matter: `make demo` and `make test`. Both do their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo venv lint unit e2e k8s bench lab-week topology-sim gpu-sharing scale-bench scale-pictures clean image chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# kube-apiserver + kube-scheduler built from Debian's source package, cached outside the repo (~7 min cold).
k8s:
	bash hack/build-k8s.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit tests/service

# The dashboard's browser test drives Debian's headless chromium; installed here when missing.
chromium:
	command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }

# Idle-GPU reclaim's end-to-end test reads a real Prometheus (Debian's package); installed here when missing.
prometheus:
	command -v prometheus >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; }

test: $(STAMP) chromium prometheus
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	export LAPILLI_K8S_BIN="$$(bash hack/build-k8s.sh | tail -n 1)" && $(BIN)/pytest -q -ra

# The service's container image (Dockerfile) built with podman; prints its name and size. Installs podman, buildah,
# runc and mmdebstrap from Debian when missing and makes a Debian base locally when no registry answers.
IMAGE ?= localhost/lapilli:dev
image: $(STAMP)
	IMAGE=$(IMAGE) PYTHON=$(BIN)/python bash hack/image.sh

demo: $(STAMP)
	bash hack/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/engine.py

# A simulated lab week with and without usage-decayed fair share: the table bench/README.md records and its picture.
lab-week: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/fair_share.py

# Network-topology-aware scheduling in the simulator: with the plugin, without it, kube-scheduler; table and picture.
topology-sim: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/network_topology.py

# Shared GPUs (vGPU) in the simulator: a lab week asking whole GPUs and asking GPU memory; table and picture.
gpu-sharing: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/gpu_sharing.py

# Issue 19's scale benches on dev clusters (about an hour on 2 cores; bench/README.md): restart recovery at 1,000 and
# 5,000 nodes and Volcano's job shapes, recorded in bench/results/, then drawn (bench/restart.png, bench/shapes.png).
scale-bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/restart.py --nodes 1000 --running 8000 --gangs 500 --out bench/results/restart-1k.json
	$(BIN)/python bench/restart.py --nodes 5000 --running 40000 --gangs 2500 --out bench/results/restart-5k.json
	$(BIN)/python bench/shapes.py --out bench/results/shapes.json
	$(BIN)/python bench/scale_plots.py

# The scale benches' pictures again, from what bench/results/ records.
scale-pictures: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/scale_plots.py

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .import_linter_cache
