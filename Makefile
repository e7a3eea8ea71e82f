# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on this project's machines; elsewhere pip fetches this release.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.kerneldojo-installed

.PHONY: demo test test-integrations lint setup clean

# The first install takes minutes (torch alone is large): each step says what it does, and pip prints
# a line per package it collects (--progress-bar off keeps bars out of logs).
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar off

$(STAMP): pyproject.toml
	@echo "kerneldojo setup [1/3]: creating $(VENV)"
	python3 -m venv $(VENV)
	@echo "kerneldojo setup [2/3]: installing $(TORCH) (the largest download)"
	$(PIP) "$(TORCH)"
	@echo "kerneldojo setup [3/3]: installing kerneldojo and its dev, cute and test dependencies"
	$(PIP) -e ".[dev,cute]"
	touch $(STAMP)
	@echo "kerneldojo setup: done"

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kerneldojo demo

# The docker backend's tests also need the docker SDK (the `docker` extra); they find or start the engine.
$(VENV)/.kerneldojo-docker-sdk: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check "docker>=7.0"
	touch $@

# The service's and Ray's tests need the `serve` and `ray` extras (Ray is large: the demo does without).
$(VENV)/.kerneldojo-serve-ray: $(STAMP) pyproject.toml
	$(PIP) -q -e ".[serve,ray]"
	touch $@

# The RL frameworks' tests (tests/test_integrations.py) need the verifiers and openenv extras: about 540 MB
# together (transformers, gradio, ...), some 40 s from a package mirror. The demo does without them.
$(VENV)/.kerneldojo-integrations: $(STAMP) pyproject.toml
	$(PIP) -q -e ".[verifiers,openenv]"
	touch $@

test: $(STAMP) $(VENV)/.kerneldojo-docker-sdk $(VENV)/.kerneldojo-serve-ray $(VENV)/.kerneldojo-integrations
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15

test-integrations: $(VENV)/.kerneldojo-integrations
	$(PY) -m pytest -q tests/test_integrations.py

clean:
	rm -rf $(VENV) build *.egg-info
