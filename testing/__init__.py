"""Helpers the tests and the benchmarks share (never shipped): neither imports the other, both import these.

``oracle`` runs the official SDK in its own virtualenv; ``emulator_http`` speaks raw signed HTTP to an emulator;
``emulator_tunnel`` drives the emulator's tunnel service in process; ``airflow_components`` runs Airflow's
components as processes; ``jvm`` holds the JVM options that make Spark start fast on a small machine.
"""
