"""Apache Airflow provider for Alibaba Cloud Tablestore and its Tunnel Service."""

import sys

if sys.version_info < (3, 11):  # noqa: UP036 - pip refuses the install (requires-python); this covers copies and odd paths
    raise ImportError(
        f"airflow-provider-tablestore needs Python >= 3.11, this is Python {sys.version.split()[0]}: "
        "use a Python 3.11, 3.12 or 3.13 environment"
    )

__version__ = "0.1.0"
