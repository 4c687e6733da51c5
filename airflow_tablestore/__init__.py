"""Apache Airflow provider for Alibaba Cloud Tablestore and its Tunnel Service."""

__version__ = "0.1.0"
