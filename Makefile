# dyngraph: `make demo` and `make test` each set up .venv and do everything from a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check

.PHONY: demo test lint bench clean

$(VENV)/.base: pyproject.toml setup.py dyngraph/_speedups.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.test: $(VENV)/.base
	$(PIP) install -e ".[onnx,viz,distributed]" "torch==2.13.0" "pytest>=8" "pytest-xdist>=3" \
		"hypothesis>=6" "ruff>=0.5" "tensorboard>=2.14"
	touch $@

demo: $(VENV)/.base
	$(PY) -m dyngraph.examples.digits

test: $(VENV)/.test
	$(PY) -m pytest -n 2 tests

lint: $(VENV)/.test
	$(VENV)/bin/ruff check dyngraph tests benchmarks

bench: $(VENV)/.test
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
