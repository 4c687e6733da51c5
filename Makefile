# airflow-tablestore: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# spark-submit (pip pyspark) finds SPARK_HOME through `python3` on PATH: the venv must come first.
export PATH := $(BIN):$(PATH)
AIRFLOW_VERSION ?= 3.3.2
PYSPARK_VERSION ?= 4.3.0
PROTO_DIR := airflow_tablestore/protocol

.PHONY: venv test test-fast demo proto lint typecheck bench emulator clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[test,airflow,spark]' "apache-airflow==$(AIRFLOW_VERSION)" "pyspark==$(PYSPARK_VERSION)"
	# The Spark provider pulls pyspark-client, which overwrites pyspark's files: put pyspark back.
	$(BIN)/python -m pip install -q --force-reinstall --no-deps "pyspark==$(PYSPARK_VERSION)"
	touch $@

test: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow and not oracle" tests

demo: venv
	$(BIN)/python -m airflow_tablestore.demo

proto: venv
	$(BIN)/python -m airflow_tablestore.protocol.generate

lint: venv
	$(BIN)/ruff check airflow_tablestore tests dags benchmarks
	$(BIN)/mypy

bench: venv
	$(BIN)/python -m benchmarks.run_all

emulator: venv
	$(BIN)/tablestore-emulator --port 8800 --data-dir .emulator-data

clean:
	rm -rf $(VENV) .demo .oracle-venv
