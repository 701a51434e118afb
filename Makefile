# podctl: the two commands the README starts with are `make demo` and `make test`.
# Both set up what they need first (idempotent), so they work on a fresh Debian 12 machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SITE   ?= inventory/sim/site.yaml
WHEELS := .cache/validation-wheels

.PHONY: setup sim-wheels sim-setup consumers slurm-keys fabric-setup demo test test-long test-fast mutants bench clean wheel installed

# Python side: a virtualenv with podctl, Ansible and the test tools. Without bytecode
# (--no-compile): Python writes it for what is imported, and torch's thousands of modules cost
# 23 s of CPU compiled at install, 7.5 s not (its CPU wheel, pip 23.2, on the 2-core CI machine).
$(BIN)/podctl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -e '.[deploy,test,validation]'
	touch $@

setup: $(BIN)/podctl

# The wheel folder the sim's validation-tools stage installs from (the sim site's
# validation.tools.wheels): torch's CPU build, numpy and their dependencies, which
# this machine's pip finds offline (find-links /opt/wheels). Downloaded into a temporary
# folder and moved into place, so an interrupted run never looks complete.
sim-wheels: setup
	@if ls $(WHEELS)/torch-2.13.0*.whl $(WHEELS)/numpy-*.whl >/dev/null 2>&1; then \
		echo "sim-wheels: $(WHEELS) already holds torch and numpy"; \
	else \
		rm -rf $(WHEELS).tmp && \
		$(BIN)/pip download -q torch==2.13.0 numpy --dest $(WHEELS).tmp && \
		rm -rf $(WHEELS) && mv $(WHEELS).tmp $(WHEELS); \
	fi

# The simulated pod's host side: podman + runc + debootstrap, engine settings, the node image, and
# ibsim (fabric-setup), which `podctl sim up` starts beside the pod for its compute fabric.
sim-setup: setup sim-wheels fabric-setup
	PODCTL_PYTHON=$(BIN)/python bash .ci/sim-setup.sh

# The real consumers of the rendered configuration (Slurm's daemons, promtool, amtool), for the tests.
consumers:
	bash .ci/consumers-setup.sh

# The Slurm keys each supported release knows (podctl/core/slurm-keys.json), read again from
# that release's own man pages: this machine's Slurm and the consumers image's. Run it when a
# release's Slurm changes; tests/deploy/test_slurm_settings.py fails until it is run.
slurm-keys: setup consumers
	$(BIN)/python -m tests.helpers.slurm_man

# The simulated InfiniBand fabric the fabric tests run the real tools on: Debian's OpenSM,
# infiniband-diags and ibsim, and ibsim 0.12 (which knows NDR) built from Debian 13's source
# into /opt/podctl-ibsim (docs/fabric.md).
fabric-setup:
	bash .ci/ibsim-setup.sh

# The main job on the built-in sim site: check and plan it, bring its nodes up as
# containers, deploy every stage onto them, then validate the pod. It ends with
# the certification verdict and the path of the HTML report; make's exit status
# is validate's (0 certified, 1 not). Every phase prints its wall time (.ci/timed), setup
# included (the virtualenv, the wheels, podman; each a no-op once done). The node image is
# built by `sim up`, the site's release alone (the tests' setup builds every release's).
TIMED := bash .ci/timed
demo:
	@PODCTL_SIM_SKIP_IMAGE=1 $(TIMED) demo-setup $(MAKE) --no-print-directory sim-setup
	@$(TIMED) check $(BIN)/podctl check $(SITE)
	@$(TIMED) plan $(BIN)/podctl plan $(SITE)
	@$(TIMED) sim-up $(BIN)/podctl sim up $(SITE)
	@$(TIMED) deploy $(BIN)/podctl deploy $(SITE)
	@$(TIMED) validate $(BIN)/podctl validate $(SITE)

# Every test of CI's tier, in two parts side by side (.ci/test-parts): the tests on the run's one
# sim pod (deployed once, by podctl installed from its wheel), in order, and beside them the
# tests that need no container. Each part prints its wall time; the long tier is `make test-long`.
# The wheel's podctl: PODCTL_TEST_PODCTL when given (.ci/run builds it during setup), else
# `make installed` builds it. Under every tier a test that cannot run here fails instead of
# being skipped (PODCTL_TEST_ALL, tests/helpers/repo.py).
PYTEST_DURATIONS := --durations=0 --durations-min=5
TEST_ENV = PODCTL_TEST_ALL=1 PODCTL_TEST_PODCTL=$${PODCTL_TEST_PODCTL:-$(INSTALLED)/bin/podctl}
test: sim-setup consumers fabric-setup
	@[ -n "$$PODCTL_TEST_PODCTL" ] || $(MAKE) --no-print-directory installed
	@$(TEST_ENV) bash .ci/timed tests bash .ci/test-parts $(BIN)/pytest $(PYTEST_DURATIONS)

# What CI cannot afford: every role's Molecule scenario, certification three times in a row, the
# collection deploying without the CLI, a node killed mid-deploy (docs/testing.md lists them).
# Run it before handing in a change to what only it covers.
test-long: sim-setup consumers
	@[ -n "$$PODCTL_TEST_PODCTL" ] || $(MAKE) --no-print-directory installed
	@$(TEST_ENV) bash .ci/timed long $(BIN)/pytest -m long $(PYTEST_DURATIONS)

# Everything that needs no containers.
test-fast: setup consumers fabric-setup
	PODCTL_TEST_ALL=1 $(BIN)/pytest -m 'not sim and not long' -n 2

# The breaks the tests must catch (docs/testing.md): each patch in tests/mutants applied to a copy
# of the working tree, and the tests it names run there; fails when a break survives. The working
# tree is never written.
mutants: setup fabric-setup
	$(BIN)/python tests/mutants/run.py

# podctl as users install it: the wheel (podctl, its Ansible collection, the validation
# package), in a virtualenv of its own outside the checkout. .ci/run deploys and validates the
# sim pod with it (PODCTL_TEST_PODCTL).
INSTALLED ?= /tmp/podctl-installed
wheel: setup
	rm -rf dist build && $(BIN)/pip wheel -q --no-deps -w dist . && rm -rf build

installed: wheel
	rm -rf $(INSTALLED) && $(PYTHON) -m venv $(INSTALLED)
	$(INSTALLED)/bin/pip install -q --upgrade pip
	$(INSTALLED)/bin/pip install -q "$$(ls dist/podctl-*.whl)[deploy]"
	$(INSTALLED)/bin/podctl --version

bench: setup
	$(BIN)/python bench/site_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis dist
