# gpuconform: `make demo` and `make test` do all set-up on a fresh machine (Debian 12, root, Go, Python 3.11).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
export KUBECONFIG := $(CURDIR)/.localcluster/kubeconfig
SUITE_ARGS := --gpuconform-config localcluster/gpuconform.yaml
APT_PKGS := containerd runc containernetworking-plugins iptables busybox-static openssl iproute2 chromium

.PHONY: gfd-labels soak rehearse gotest bench bench-scale lint help deps host-deps cluster-up cluster-down cluster-status faults fault fault-clear bed test unit demo suite cleanup wheel wheel-try

help:
	@echo "make demo | test | cluster-up | cluster-down | cluster-status | bed PROFILE=... LAYOUT=... [STACK=...] | faults | fault NAME=... | fault-clear | cleanup [FORCE=1]"
	@echo "make bench | bench-scale [N=1000] [PODS=40] | soak [N=10] | rehearse [N=1] [MODE=upgrade|restart] | gfd-labels [GFD_TAG=v0.19.3] | wheel | wheel-try"

deps: host-deps $(VENV)/.installed

host-deps:
	@for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; fi

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

# The bed needs the virtualenv only for the suite image: cluster.py up installs it (this Makefile's recipe) beside its
# Go build, so on a fresh checkout the two overlap.
cluster-up: host-deps
	python3 localcluster/cluster.py up

cluster-down:
	python3 localcluster/cluster.py down

cluster-status:
	@python3 localcluster/cluster.py status

faults:
	@python3 localcluster/cluster.py faults

fault:
	@test -n "$(NAME)" || { echo "usage: make fault NAME=<name> (see make faults)"; exit 2; }
	python3 localcluster/cluster.py fault $(NAME)

fault-clear:
	python3 localcluster/cluster.py fault-clear

# Turns the running bed's real node into another pool profile / plugin install layout (localcluster/shapes.py).
# PROFILE: plain | time-slicing | time-slicing-renamed | mig-mixed; LAYOUT: helm | static | operator;
# STACK: nvidia (NVIDIA's own plugin and GFD over the mock NVML) | sim (the simulated plugin; mig-mixed always).
# At start-up the same choice comes from GPUCONFORM_BED_PROFILE / _LAYOUT / _STACK (default plain, helm, nvidia),
# and the Kubernetes release from K8S_VERSION (default v1.37.2; localcluster/tools/k8s/versions/ lists the pinned ones).
bed:
	@test -n "$(PROFILE)" -a -n "$(LAYOUT)" || { echo "usage: make bed PROFILE=<plain|time-slicing|time-slicing-renamed|mig-mixed> LAYOUT=<helm|static|operator> [STACK=<nvidia|sim>]"; exit 2; }
	python3 localcluster/cluster.py bed $(PROFILE) $(LAYOUT) $(STACK)

# The suite's own tests: unit, pytester, and end-to-end against the local test bed (healthy run + fault matrix).
test: lint gotest cluster-up
	$(PYTEST) testing -p no:cacheprovider

# Re-records what NVIDIA's own GPU Feature Discovery writes for each hardware shape, over our mock NVML
# (localcluster/mocknvml/README.md): testing/unit/data/gfd/*.labels, which testing/unit/test_gfd_recorded.py judges.
GFD_TAG ?= v0.19.3
gfd-labels:
	localcluster/mocknvml/build.sh
	GOMODCACHE=$$HOME/.cache/go/mod GOCACHE=$$HOME/.cache/go-build GOBIN=$$HOME/.cache/gpuconform/nvidia/$(GFD_TAG) \
	  go install github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery@$(GFD_TAG)
	GFD_TAG=$(GFD_TAG) localcluster/mocknvml/run_gfd.sh

# The simulated plugin, nvidia-smi and vector-add stand-in, and the bed's kubelet-checkpoint tool (Go unit tests).
gotest:
	cd localcluster/images && go test ./...
	cd localcluster/tools/k8s && go test -modfile=versions/$${K8S_VERSION:-v1.37.2}.mod -tags selinux,notest ./cmd/...

lint: deps
	$(VENV)/bin/ruff check .

unit: deps
	$(PYTEST) testing/unit testing/plugin -p no:cacheprovider

# The conformance suite against the local cluster, with the report.
suite: $(VENV)/.installed
	mkdir -p reports
	$(PYTEST) tests $(SUITE_ARGS) --html reports/report.html --self-contained-html \
	  --junitxml reports/junit.xml --gpuconform-summary reports/summary.json

# The suite as a package: dist/gpuconform-<version>-py3-none-any.whl and its sdist (`python -m build`: the sdist,
# then the wheel from it, so nothing outside the package's sources gets in). The checks are gpuconform.checks in it
# (built from tests/), the plugin registers through its pytest11 entry point (docs/install.md).
wheel: $(VENV)/.installed
	rm -rf dist
	$(PY) -m build --outdir dist .

# A new user's try of the wheel against the bed: a fresh virtualenv outside the checkout, `pip install` of the wheel
# (its dependencies from the index), and one run of the installed checks from a directory that holds only the config.
WHEEL_TRY := $(or $(TMPDIR),/tmp)/gpuconform-wheel-try
wheel-try: wheel
	rm -rf $(WHEEL_TRY) && python3 -m venv $(WHEEL_TRY)/venv && mkdir $(WHEEL_TRY)/run
	$(WHEEL_TRY)/venv/bin/pip install -q dist/gpuconform-*.whl
	cp localcluster/gpuconform.yaml $(WHEEL_TRY)/run/gpuconform.yaml
	cd $(WHEEL_TRY)/run && $(WHEEL_TRY)/venv/bin/pytest --pyargs gpuconform.checks --gpuconform-config gpuconform.yaml \
	  -p no:cacheprovider

# The demo bed has a DRA node (gpu-node-dra: localcluster/dranode.py) beside the device-plugin node: one
# zero-config run certifies both. `make test`'s end-to-end modules bring it up only where they need it.
demo: export GPUCONFORM_BED_DRA := 1
demo: cluster-up suite

# Wall time vs critical path and API request count of one healthy suite run (figures printed, not asserted), with
# the DRA node up: its claim-to-running figures beside the device-plugin node's.
bench: export GPUCONFORM_BED_DRA := 1
bench: cluster-up $(VENV)/.installed
	$(PY) testing/bench.py

# The same at scale: N kwok GPU nodes (default 1000) over the three kwok pools, the node-level checks
# (-k "(advertised or capacity) and not pci_hardware": the API-only ones) on all of them, figures printed; the
# nodes are removed afterwards, also on Ctrl-C.
N ?= 1000
bench-scale: cluster-up $(VENV)/.installed
	$(PY) testing/bench.py --scale $(N) $(if $(PODS),--pods-per-node $(PODS))

# N healthy runs in a row on the bed (`make soak N=5`; 10 unless N is given on the command line): 0 failures
# and 0 objects left expected (testing/soak.py).
soak: cluster-up $(VENV)/.installed
	$(PY) testing/soak.py $(if $(filter command line,$(origin N)),$(N),10)

# The rollout rehearsal on the bed (docs/rollout.md): N clean rehearsals (default 1) of NVIDIA's plugin and the DRA
# driver while the suite holds their nodes. MODE=upgrade (default): the bed rolls NVIDIA's plugin to its other
# release (v0.19.3 <-> v0.18.2) and restarts the DRA driver; MODE=restart: the suite restarts both, same release.
# Per-rehearsal figures, then p50/max of the window.
rehearse: export GPUCONFORM_BED_DRA := 1
rehearse: cluster-up $(VENV)/.installed
	$(PY) testing/rehearse.py $(if $(filter command line,$(origin N)),$(N),1) --mode $(if $(MODE),$(MODE),upgrade)

# Deletes the namespaces of gpuconform runs that are no longer alive (heartbeat stale, or ended); it prints what it
# deletes and what it leaves, and why (gpuconform/cleanup.py). Only a run's own namespaces: named
# gpuconform-<run id>[-node] and labelled with that run id, never another namespace that carries the part-of label.
# FORCE=1: also live runs' namespaces and those without a heartbeat.
cleanup: deps
	$(PY) -m gpuconform.cleanup $(if $(filter 1 yes true,$(FORCE)),--force)

# Regenerates docs/config-reference.md and docs/reason-codes.md from the code (testing/unit/test_docs.py checks them).
.PHONY: docs
docs: $(VENV)/.installed
	$(PY) -m gpuconform.docs
