# Two commands that work on a fresh machine:
#   make demo   sets everything up and runs gpuwhy on the built-in example
#   make test   sets everything up and runs the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TF_SPEC ?= tensorflow==2.21.0

.PHONY: setup demo test bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TF_SPEC)" -e ".[test]"
	touch $@

setup: $(BIN)/.installed

demo: setup
	mkdir -p out
	-$(BIN)/gpuwhy check --json out/check.json

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/bench_check.py

clean:
	rm -rf $(VENV) out build *.egg-info
