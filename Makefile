# dyngraph: `make demo` and `make test` each set up .venv and do everything from a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check

.PHONY: demo test lint bench clean

$(VENV)/.base: pyproject.toml setup.py dyngraph/_speedups.c dyngraph/_kernels.c dyngraph/_autobatch.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.test: $(VENV)/.base
	$(PIP) install -e ".[onnx,viz,distributed]" "torch==2.13.0" "pytest>=8" "pytest-xdist>=3" \
		"hypothesis>=6" "ruff>=0.5" "tensorboard>=2.14" "import-linter>=2"
	# MKL's products (dyngraph/ops/_gemm.py, tests/test_gemm_backend.py): the library alone,
	# without its OpenMP/TBB runtimes, which the sequential layer does not load
	$(PIP) install --no-deps "mkl>=2025" || echo "warning: could not install mkl; the MKL product tests skip"
	touch $@

demo: $(VENV)/.base
	$(PY) -m dyngraph.examples.digits

# The second pass runs the op table, autograd, hypothesis and port tests without the C
# accelerator: the pure-Python dispatch and engine are the reference, so CI runs them too,
# with the node-slot/cycle tests and the autobatch interpreter's Python reference (its C
# fast path, dyngraph/_autobatch.c, is off in this pass).
# (tests/test_speedups.py runs both paths itself.)  Measured on the shared 2-core machine
# under heavy load: first pass 527 s, this pass 306 s, lint-imports 1 s.
PURE_TESTS := tests/test_ops.py tests/test_autograd_engine.py tests/test_autograd_function.py \
	tests/test_autograd_functional.py tests/test_hypothesis.py tests/test_port_programs.py \
	tests/test_port_dynamic_gaps.py tests/test_gc_nodes.py tests/test_mpnn_scatter.py \
	tests/test_autobatch_fast.py tests/test_autobatch_split.py tests/test_autobatch_models.py \
	tests/test_autobatch_gather.py tests/test_autobatch_fuse.py tests/test_autobatch_consts.py \
	tests/test_autobatch_scatter.py tests/test_autobatch_cellfn.py tests/test_autobatch_alias.py

test: $(VENV)/.test
	$(PY) -m pytest -n 2 tests
	DYNGRAPH_PURE_PYTHON=1 $(PY) -m pytest -n 2 $(PURE_TESTS)
	$(VENV)/bin/lint-imports

lint: $(VENV)/.test
	$(VENV)/bin/ruff check dyngraph tests benchmarks

bench: $(VENV)/.test
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
