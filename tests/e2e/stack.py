"""docker-compose.yaml's production stack as local processes (a helper module, not a test module): a throwaway
PostgreSQL cluster, a Spark standalone master and worker, the emulator, and Airflow's four components with the
LocalExecutor, every Airflow setting taken from the compose file itself with its hostnames mapped to
127.0.0.1 and free ports (:func:`stack_env`), so the file and the test cannot drift apart.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from testing.airflow_components import machine_settings
from testing.jvm import FAST_JVM

from .spark_runs import BIN

REPO = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
AIRFLOW_SERVICES = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")

TEST_ONLY = {
    # new DAG files are parsed within seconds (the default, 5 min, suits a deployment's stable dags folder)
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    # a restarted triggerer takes over a killed one's triggers after 5 s instead of 30 s
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
}
"""The Airflow settings the stack test adds to docker-compose.yaml's, each only to make the test faster."""


def compose_airflow_env() -> dict[str, str]:
    """The environment docker-compose.yaml gives Airflow's components (the same for all four)."""
    envs = [{k: str(v) for k, v in SERVICES[name]["environment"].items()} for name in AIRFLOW_SERVICES]
    assert all(env == envs[0] for env in envs[1:]), "the compose file's Airflow components differ in environment"
    return envs[0]


def compose_restart_policies() -> dict[str, str]:
    """Each Airflow component's restart policy in the compose file (the test's supervisor plays it)."""
    return {name: str(SERVICES[name].get("restart", "no")) for name in AIRFLOW_SERVICES}


def compose_emulator() -> dict[str, str]:
    """The emulator's instance and credentials as the compose file's ``tablestore_default`` names them."""
    conn = json.loads(compose_airflow_env()["AIRFLOW_CONN_TABLESTORE_DEFAULT"])
    return {"instance": conn["extra"]["instance_name"], "access_key_id": conn["login"],
            "access_key_secret": conn["password"]}


def compose_worker_args() -> list[str]:
    """The Spark worker's resources (``--cores``, ``--memory``) as the compose file starts it."""
    command = SERVICES["spark-worker"]["command"]
    return command[command.index("org.apache.spark.deploy.worker.Worker") + 2:]


def local_addresses(*, postgres_port: int, api_port: int, emulator_endpoint: str, spark_port: int,
                    dags: Path) -> dict[str, str]:
    """What each of the compose file's service addresses (and its dags mount) becomes on 127.0.0.1."""
    return {
        "@postgres:5432/": f"@127.0.0.1:{postgres_port}/",
        "http://airflow-api-server:8080/": f"http://127.0.0.1:{api_port}/",
        "http://emulator:8800": emulator_endpoint,
        '"host": "spark://spark-master", "port": 7077': f'"host": "spark://127.0.0.1", "port": {spark_port}',
        "/opt/airflow/dags": str(dags),
        "airflow-scheduler": "127.0.0.1",  # SPARK_LOCAL_HOSTNAME: where executors reach the driver
    }


def localize(env: dict[str, str], addresses: dict[str, str]) -> dict[str, str]:
    """``env`` with every compose address replaced by its local one."""
    out = {}
    for name, value in env.items():
        for compose, local in addresses.items():
            value = value.replace(compose, local)
        out[name] = value
    return out


def stack_env(home: Path, addresses: dict[str, str]) -> dict[str, str]:
    """The environment of the stack's Airflow components and CLI: docker-compose.yaml's (localized), the test
    speed-ups of :data:`TEST_ONLY`, the settings of one machine shared by several Airflows (``machine_settings``),
    and what the image provides (the venv's ``python``, ``spark-submit``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__", "TABLESTORE_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "PATH": str(BIN) + os.pathsep + env.get("PATH", ""),
        # the image's interpreter (it has this package) for the driver; the editable install needs the repository
        # on the path for PySpark's lookup of pyspark_tablestore (the streaming job), as a regular install has it
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TABLESTORE_SPARK_LOG_LEVEL": "ERROR",
        "_JAVA_OPTIONS": FAST_JVM,
    })
    env.update(localize(compose_airflow_env(), addresses))
    env.update(TEST_ONLY)
    env.update(machine_settings())
    return env


def worker_env() -> dict[str, str]:
    """The Spark daemons' environment: the compose worker's ``PYSPARK_PYTHON`` is the image's Python (here the
    venv's, which has this package); loopback only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__", "TABLESTORE_"))}
    assert set(SERVICES["spark-worker"]["environment"]) == {"PYSPARK_PYTHON"}
    env.update({"PYSPARK_PYTHON": sys.executable, "PATH": str(BIN) + os.pathsep + env.get("PATH", ""),
                "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1"})
    return env
