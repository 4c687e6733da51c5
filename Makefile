# airflow-tablestore: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# spark-submit (pip pyspark) finds SPARK_HOME through `python3` on PATH: the venv must come first.
export PATH := $(BIN):$(PATH)
AIRFLOW_VERSION ?= 3.3.2
PROTO_DIR := airflow_tablestore/protocol

.PHONY: test-crash test-journeys venv browser test test-compat test-fast test-stack postgres demo proto lint bench emulator dist clean

venv: $(VENV)/.installed

# The editable install also compiles the optional PlainBuffer extension (decoder and Arrow builders) in place
# (docs/plainbuffer.md): rerun it when its C sources or headers change.
PLAINBUFFER_C := $(wildcard airflow_tablestore/client/plainbuffer/*.c airflow_tablestore/client/plainbuffer/*.h)
$(VENV)/.installed: pyproject.toml $(PLAINBUFFER_C)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[test,airflow,spark]' "apache-airflow==$(AIRFLOW_VERSION)"
	touch $@

# The browser test of the Tablestore page (tests/e2e/test_ui_page.py) drives Debian's headless Chromium with
# Playwright (the test extra); Playwright's own browser download is not used.
CHROMIUM ?= /usr/bin/chromium
browser:
	test -x $(CHROMIUM) || (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium)

# Expected durations on a quiet 2-core machine (CI's size; a shared machine takes 1.5-3x): `make venv` 2-4 min
# (warm pip cache), browser and postgres ~1 min each from apt. The suite runs on two pytest-xdist workers, a test
# file each at a time: the end-to-end tests mostly wait on Airflow, Spark and the emulator, so two files at once use
# both cores (PYTEST_WORKERS=0 runs it in one process). Measured from a fresh clone on a quiet 2-core machine
# (2026-11-29, two runs): the whole target 15 min 56 s (with the venv) and 17 min 9 s (after `make demo` made it),
# the suite 14 min 43 s and 17 min 8 s (2,238 tests); on busier machines the suite took 19-23 min. Slowest: test_scheduler.py ~6 min, test_stack.py's short scenario ~4 min, the streaming job DAG ~2 min.
PYTEST_WORKERS ?= 2
test: venv browser postgres
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile tests

# PostgreSQL 15's server from Debian for the end-to-end tests' metadata database (tests/e2e/postgres.py runs a
# throwaway cluster of its own; the package's default cluster is not used)
PG_BINDIR := /usr/lib/postgresql/15/bin
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
postgres:
	@test -x $(PG_BINDIR)/initdb || { $(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15; }

# docker-compose.yaml's stack run whole as processes, with faults (PostgreSQL, Spark standalone, the emulator,
# Airflow's components; tens of minutes). `make test` runs its short scenario.
test-stack: venv postgres
	TABLESTORE_STACK=1 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/e2e/test_stack.py

# The compatibility matrix (Python 3.11-3.13, lowest protobuf, lowest Airflow, one-command install of the built wheel,
# the sdist on its own), docs/first-hour.md's journeys from the wheel, the browser test of the Tablestore page against
# the wheel's api-server (needs `make browser`), and the release check (python -m build, twine check): venvs in .venvs/.
# ~22 min on a quiet 2-core machine with a cold .venvs/ (CI measured 23 min; since then 3.12 and 3.13 run VERSION_TESTS,
# not the whole core suite, ~1.5 min less each, and the browser test came in, ~2-3 min more). The parts: building the
# venvs 2-3 min each, the journeys 8-16 min, the core envs ~1-2.5 min each, Airflow 3.2.0 ~2 min, browser test 2-3 min.
test-compat: venv browser
	TABLESTORE_COMPAT=1 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/compat

# The crash tests (SIGKILLs of the consumer / a streaming job and the emulator, faults): dozens of spark-submit runs,
# 18 min on a quiet 2-core machine (measured from a fresh clone; 6 kills per phase and 3 emulator restarts each)
test-crash: venv
	TABLESTORE_CRASH=1 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/e2e/test_crash_matrix.py tests/e2e/test_stream_crash.py

# docs/first-hour.md's journeys alone (test-compat runs them too, on the wheel it builds): as written, from the built
# wheel, with the system's python3 first on PATH and a fresh HOME (minutes)
test-journeys: venv
	TABLESTORE_COMPAT=1 $(BIN)/python -m pytest -q -p no:cacheprovider -s tests/compat/test_journeys.py

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow and not oracle" tests

demo: venv
	$(BIN)/python -m demo

proto: venv
	$(BIN)/python -m airflow_tablestore.protocol.generate

lint: venv
	$(BIN)/ruff check airflow_tablestore tests dags benchmarks demo testing
	$(BIN)/mypy

bench: venv
	$(BIN)/python -m benchmarks.run_all

EMULATOR_PORT ?= 8800
EMULATOR_DATA ?= .emulator-data
emulator: venv
	$(BIN)/tablestore-emulator --port $(EMULATOR_PORT) --data-dir $(EMULATOR_DATA)

# The sdist and the wheel in dist/. Earlier build trees go first: setuptools would reuse a stale egg-info's file list.
dist: venv
	rm -rf build dist airflow_provider_tablestore.egg-info
	$(BIN)/python -m build
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) .venvs .demo .oracle-venv
