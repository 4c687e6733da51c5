"""Benchmarks of airflow-tablestore; each prints ratios against a baseline measured in the same run."""
