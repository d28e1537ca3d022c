# Two commands that work on a fresh machine:
#   make demo   sets everything up and runs `gpuwhy run` on the bundled example training script
#   make test   sets everything up and runs the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TF_SPEC ?= tensorflow==2.21.0
# The Keras the suite runs on (the newest tested), and the oldest Keras 3 that TF 2.21
# accepts: the Keras compatibility set (tests/keras) also runs on it, from its own folder.
KERAS_SPEC ?= keras==3.15.1
KERAS_OLDEST ?= 3.12.0
KERAS_COMPAT := $(VENV)/keras-compat
# The HTML report tests open the report in this Chromium (driven by playwright, which
# downloads no browser of its own); Debian's package is installed when it is missing.
CHROMIUM ?= /usr/bin/chromium
# The live-metrics tests start a real Prometheus and Pushgateway (Debian's packages).
PROMETHEUS ?= /usr/bin/prometheus
PUSHGATEWAY ?= /usr/bin/prometheus-pushgateway
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo lint test test-fast corpus bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TF_SPEC)" "$(KERAS_SPEC)" -e ".[test]"
	rm -rf $(KERAS_COMPAT) && $(BIN)/pip install -q --no-deps --target $(KERAS_COMPAT)/$(KERAS_OLDEST) "keras==$(KERAS_OLDEST)"
	touch $@

$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "no $(CHROMIUM) and no apt-get: install Chromium and run make with CHROMIUM=/path/to/chromium"; exit 1; }
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation

$(PROMETHEUS) $(PUSHGATEWAY):
	@command -v apt-get >/dev/null || { echo "no $@ and no apt-get: install Prometheus and its Pushgateway and run make with PROMETHEUS=... PUSHGATEWAY=..."; exit 1; }
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-pushgateway

# gpuwhy's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (these machines
# set it) an editable install's modules are compiled again at every start, 0.3-0.6 s
# before the watched program begins (docs/speed.md); Python still reads a .pyc, and
# compiles a module whose source changed since in memory, as it would without one. The
# dataclasses' generated methods likewise (gpuwhy/dataclass_code.py: 0.1 s a start).
$(BIN)/.compiled: $(BIN)/.installed $(shell find gpuwhy -name '*.py')
	$(BIN)/python -m compileall -q gpuwhy
	$(BIN)/python -c "from gpuwhy.dataclass_code import write_all; write_all()"
	touch $@

setup: $(BIN)/.installed $(BIN)/.compiled $(CHROMIUM) $(PROMETHEUS) $(PUSHGATEWAY)

# The example's own output and exit status pass through; the diagnosis goes to stderr,
# to out/run.json (re-render it with: gpuwhy report out/run.json -v) and to out/run.html.
demo: $(BIN)/.installed $(BIN)/.compiled
	mkdir -p out
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/gpuwhy run --json out/run.json --html out/run.html examples/slow_training.py

# Lint, format and types first (configured in pyproject.toml): they take seconds.
lint: $(BIN)/.installed
	$(BIN)/ruff check gpuwhy tests benchmarks tools examples
	$(BIN)/ruff format --check gpuwhy tests benchmarks tools
	$(BIN)/mypy

# Two pytest-xdist workers: run one after another the tests kept a 2-core host's second
# core mostly idle (load 1.0-1.2), 57 minutes where two take about 32 (docs/testing.md).
# A module's tests stay on one worker (--dist loadfile): the program runs a module
# shares through its fixtures run once. The slowest twenty are named at the end.
TEST_WORKERS ?= 2
test: setup lint
	CHROMIUM=$(CHROMIUM) PROMETHEUS=$(PROMETHEUS) PUSHGATEWAY=$(PUSHGATEWAY) \
	GPUWHY_KERAS_COMPAT=$(abspath $(KERAS_COMPAT)) GPUWHY_KERAS_OLDEST=$(KERAS_OLDEST) \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=20

# The one-minute loop while working: lint, then the tests of hand-made facts and saved
# records only (no TensorFlow, no program started, no browser, no server, nothing at
# scale; tests/speed_marks.py marks them). `make test` stays what CI runs.
FAST := not tf and not subprocess and not browser and not server and not corpus and not slow
test-fast: $(BIN)/.installed lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "$(FAST)"

# The corpus alone (tests/corpus): every finding found on its programs and saved records
corpus: $(BIN)/.installed
	$(BIN)/python -m pytest -q tests/corpus

bench: setup
	$(BIN)/python benchmarks/bench_check.py
	$(BIN)/python benchmarks/bench_run.py
	$(BIN)/python benchmarks/bench_input.py

clean:
	rm -rf $(VENV) out build *.egg-info
