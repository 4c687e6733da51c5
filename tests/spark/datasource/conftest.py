"""The data source tests use the Spark session and emulator fixtures of ``tests/spark/conftest.py``."""
