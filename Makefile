# Two commands for a newcomer: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fedplace-installed
export NO_PROXY := 127.0.0.1,localhost,::1
export no_proxy := $(NO_PROXY)
export RUST_BACKTRACE := 0

.PHONY: install test demo bench clean

install: $(STAMP)

# OPA's own compiler and evaluator (OPA 1.20 as a c-shared library), the compiler
# of record for the devstack engine and the Rego tests. Its metadata asks for
# Python >= 3.14 but it works on 3.11, hence the flags; it has no dependencies.
OPA_BINDINGS := opa-golib-python-bindings==0.4.4

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --ignore-requires-python --no-deps '$(OPA_BINDINGS)'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m devstack.demo

bench: $(STAMP)
	$(PY) bench/engine.py
	$(PY) bench/kube.py
	$(PY) bench/sync.py
	$(PY) bench/remediation.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
