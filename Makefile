# Two commands that work on a fresh machine:
#   make demo   sets everything up and runs `gpuwhy run` on the bundled example training script
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

# The example's own output and exit status pass through; the diagnosis goes to stderr
# and to out/run.json (re-render it with: gpuwhy report out/run.json -v).
demo: setup
	mkdir -p out
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/gpuwhy run --json out/run.json examples/slow_training.py

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/bench_check.py
	$(BIN)/python benchmarks/bench_run.py

clean:
	rm -rf $(VENV) out build *.egg-info
