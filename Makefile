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

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
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
