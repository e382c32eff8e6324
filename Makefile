# Two commands for a newcomer: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fedplace-installed
export NO_PROXY := 127.0.0.1,localhost,::1
export no_proxy := $(NO_PROXY)

.PHONY: help install lock lint test test-real test-karmada-real demo bench bench-real fuzz clean node-admit-demo

install: $(STAMP) ## create .venv and install fedplace, the devstack and the test tools (pinned by constraints.txt)

# OPA's own compiler and evaluator (OPA 1.20 as a c-shared library): the compiler
# of record, the devstack engine's evaluator, what runs the Rego tests and `fedplace
# what-if`'s evaluator. Pinned in insight/opa-bindings.txt, which the Dockerfile and
# what-if's error message read too. Its metadata asks for Python >= 3.14 but it works on
# 3.11, hence the flags; it has no dependencies.
OPA_BINDINGS := insight/opa-bindings.txt

# Every version make installs is pinned in constraints.txt (`make lock` writes it anew).
CONSTRAINTS := constraints.txt

# fedplace (editable, with the test extra) and the devstack, its own distribution, at the
# versions of $(CONSTRAINTS). PIP_CONSTRAINT also holds in pip's isolated build environments.
$(STAMP): pyproject.toml devstack/pyproject.toml $(OPA_BINDINGS) $(CONSTRAINTS) Makefile
	$(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/$(CONSTRAINTS) $(PY) -m pip install --quiet --upgrade pip
	PIP_CONSTRAINT=$(CURDIR)/$(CONSTRAINTS) $(PY) -m pip install --quiet -e '.[test]' -e ./devstack
	$(PY) -m pip install --quiet --ignore-requires-python --no-deps -r $(OPA_BINDINGS)
	touch $(STAMP)

# constraints.txt anew: pyproject.toml's ranges resolved in a fresh virtualenv, then frozen.
LOCK_VENV := .lock-venv
lock: ## write constraints.txt anew from pyproject.toml's ranges
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet '.[test]' ./devstack
	{ sed -n '/^#/p' $(CONSTRAINTS); \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | grep -iv '^fedplace\|^opa-golib\|^#'; } \
	  > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)

lint: $(STAMP) ## check the Python code with ruff: pyflakes, bugbear, isort (configured in pyproject.toml)
	$(PY) -m ruff check .

test: $(STAMP) ## run the test suite on the devstack servers (PYTEST_ARGS=... to narrow it)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The whole suite against a real OPA and a real kube-apiserver (CI's conformance stage): both
# FEDPLACE_TEST_OPA_URL and FEDPLACE_TEST_KUBECONFIG must be set, e.g. by
# `eval "$$(../shared/real-servers/up)"`. README: "Tests against real servers".
test-real: $(STAMP) ## run the test suite against a real OPA and kube-apiserver (FEDPLACE_TEST_* set)
	@test -n "$$FEDPLACE_TEST_OPA_URL" -a -n "$$FEDPLACE_TEST_KUBECONFIG" || { \
	  echo "make test-real: set FEDPLACE_TEST_OPA_URL and FEDPLACE_TEST_KUBECONFIG (README: Tests against real servers)" >&2; exit 2; }
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The Karmada tests against real Karmada (CI's conformance stage, after `make test-real`): the
# scenario suite (marker `karmada`) and fedplace on real Karmada (marker `karmada_real`), nothing
# else — the rest of the suite would meet karmada-webhook's failurePolicy Fail on Karmada's
# resources, and the devstack's test CRDs are never put over Karmada's own. Needs the two variables
# of test-real and KARMADA_REAL_STATE, e.g. by `eval "$$(../shared/real-servers/karmada-up
# "$$FEDPLACE_TEST_KUBECONFIG" 0)"`. README: "Tests against real servers".
test-karmada-real: $(STAMP) ## run the Karmada tests against real Karmada (CI's conformance stage; README)
	@test -n "$$FEDPLACE_TEST_OPA_URL" -a -n "$$FEDPLACE_TEST_KUBECONFIG" -a -n "$$KARMADA_REAL_STATE" || { \
	  echo "make test-karmada-real: set FEDPLACE_TEST_OPA_URL, FEDPLACE_TEST_KUBECONFIG and KARMADA_REAL_STATE (README: Tests against real servers)" >&2; exit 2; }
	$(PY) -m pytest -q -m "karmada or karmada_real" $(PYTEST_ARGS)

demo: $(STAMP) ## run the whole system on the devstack, step by step, each step checked
	$(PY) -m devstack.demo

# Node-level pod admission (KEP-2823): a pod admitted and one rejected, with the reasons.
node-admit-demo: $(STAMP) ## node-level pod admission: a pod admitted and one rejected, with the reasons
	$(PY) -m devstack.nodeadmit_demo

# BENCH_ARGS: server flags for every benchmark, e.g. BENCH_ARGS="--opa-url URL --kubeconfig PATH"
# (external scratch servers instead of devstack ones; see docs/benchmarks.md).
bench: $(STAMP) ## run every benchmark on devstack servers (BENCH_ARGS=... for external ones)
	$(PY) bench/engine.py $(BENCH_ARGS)
	$(PY) bench/admission.py $(BENCH_ARGS)
	$(PY) bench/kube.py $(BENCH_ARGS)
	$(PY) bench/sync.py $(BENCH_ARGS)
	$(PY) bench/remediation.py $(BENCH_ARGS)
	$(PY) bench/nodeadmit.py $(BENCH_ARGS)
	$(PY) bench/limitrange.py $(BENCH_ARGS)
	$(PY) bench/schedulingpolicy.py $(BENCH_ARGS)
	$(PY) bench/insight.py $(BENCH_ARGS)
	$(PY) bench/karmada.py $(BENCH_ARGS)
	$(PY) bench/scale.py $(BENCH_ARGS)
	$(PY) bench/ha.py $(BENCH_ARGS)
	$(PY) bench/kube_slim.py

# Every benchmark against the real servers (as `make test-real`: both variables set). The engine,
# LimitRange and SchedulingPolicy benchmarks measure the devstack engine beside the real OPA in the
# same run; docs/benchmarks.md has both figures for each.
bench-real: $(STAMP) ## run every benchmark against the real servers (FEDPLACE_TEST_* set)
	@test -n "$$FEDPLACE_TEST_OPA_URL" -a -n "$$FEDPLACE_TEST_KUBECONFIG" || { \
	  echo "make bench-real: set FEDPLACE_TEST_OPA_URL and FEDPLACE_TEST_KUBECONFIG (README: Tests against real servers)" >&2; exit 2; }
	$(MAKE) bench BENCH_ARGS="--opa-url $$FEDPLACE_TEST_OPA_URL --kubeconfig $$FEDPLACE_TEST_KUBECONFIG $(BENCH_ARGS)"

# The long fuzz campaign against the webhook and opa-kube-sync (seeded, bounded in
# time; tests/fuzz/). `make test` runs a short sample of it. Figures: docs/fuzz.md.
FUZZ_SEED ?= 17
FUZZ_REQUESTS ?= 6000
FUZZ_CONFIGMAP_OPS ?= 300
FUZZ_SECONDS ?= 900
fuzz: $(STAMP) ## the long fuzz campaign against the webhook and opa-kube-sync
	FEDPLACE_FUZZ_SEED=$(FUZZ_SEED) FEDPLACE_FUZZ_REQUESTS=$(FUZZ_REQUESTS) \
	FEDPLACE_FUZZ_CONFIGMAP_OPS=$(FUZZ_CONFIGMAP_OPS) FEDPLACE_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	FEDPLACE_FUZZ_REPORT=$(or $(FUZZ_REPORT),.fuzz-report.json) \
	$(PY) -m pytest -q -s tests/fuzz

clean: ## remove .venv, caches and build output
	rm -rf $(VENV) .pytest_cache build *.egg-info devstack/build devstack/*.egg-info

# `make help`: every target with its `## ` comment, one line each.
help: ## list the targets, one line each
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
