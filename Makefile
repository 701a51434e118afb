# podctl: the two commands the README starts with are `make demo` and `make test`.
# Both set up what they need first (idempotent), so they work on a fresh Debian 12 machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SITE   ?= inventory/sim/site.yaml

.PHONY: setup sim-setup demo test test-fast bench clean

# Python side: a virtualenv with podctl, Ansible and the test tools.
$(BIN)/podctl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[deploy,test,validation]'
	touch $@

setup: $(BIN)/podctl

# The simulated pod's host side: podman + runc + debootstrap, engine settings, the node image.
sim-setup: setup
	PODCTL_PYTHON=$(BIN)/python bash .ci/sim-setup.sh

# The main job on the built-in sim site: check and plan it, bring its nodes up as
# containers, and deploy every stage onto them (ends with the per-host recap).
demo: sim-setup
	$(BIN)/podctl check $(SITE)
	$(BIN)/podctl plan $(SITE)
	$(BIN)/podctl sim up $(SITE)
	$(BIN)/podctl deploy $(SITE)

# Every test, the simulated pod's included.
test: sim-setup
	$(BIN)/pytest

# Everything that needs no containers.
test-fast: setup
	$(BIN)/pytest -m 'not sim'

bench: setup
	$(BIN)/python bench/site_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
