# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on this project's machines; elsewhere pip fetches this release.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.kerneldojo-installed

.PHONY: demo test lint setup clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,cute]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kerneldojo demo

# The docker backend's tests also need the docker SDK (the `docker` extra); they find or start the engine.
$(VENV)/.kerneldojo-docker-sdk: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check "docker>=7.0"
	touch $@

test: $(STAMP) $(VENV)/.kerneldojo-docker-sdk
	$(PY) -m ruff check .
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
