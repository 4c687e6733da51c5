"""A throwaway PostgreSQL cluster for end-to-end tests (a helper module, not a test module).

``initdb`` into a temporary directory, one database and role (``airflow``/``airflow``, as docker-compose.yaml's
``postgres`` service), the server on 127.0.0.1 and a free port only (no Unix socket), password authentication.
PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` OS user (the Debian package's).
The server is stopped by its PID (SIGINT: PostgreSQL's fast shutdown); :meth:`restart` keeps the data.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pytest

from testing.airflow_components import free_port

BINDIR = Path(os.environ.get("TABLESTORE_PG_BINDIR", "/usr/lib/postgresql/15/bin"))
USER = PASSWORD = DATABASE = "airflow"  # docker-compose.yaml's POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB


def require_postgres() -> None:
    """Skip with how to install PostgreSQL when its server binaries are missing (``make test`` installs them)."""
    missing = [name for name in ("initdb", "postgres", "pg_isready", "psql") if not (BINDIR / name).is_file()]
    if missing:
        pytest.skip(f"PostgreSQL server binaries missing in {BINDIR} ({', '.join(missing)}): "
                    "`apt-get install postgresql-15` (the Makefile's `postgres` target), or set TABLESTORE_PG_BINDIR")


class PostgresCluster:
    """``with PostgresCluster() as pg: pg.url`` — the SQLAlchemy URL Airflow takes (psycopg2 driver)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="tablestore-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        # as root, run as the postgres user (initdb and postgres refuse root); otherwise as ourselves
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def _as_owner(self) -> dict[str, object]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def _run(self, *cmd: str) -> None:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, cwd=self.root,
                              **self._as_owner())  # type: ignore[call-overload]
        assert done.returncode == 0, f"{cmd[0]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"

    def start(self) -> PostgresCluster:
        require_postgres()
        if not self.data.exists():
            if self.user is not None:
                os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
            pwfile = self.root / "pwfile"
            pwfile.write_text(PASSWORD + "\n")
            if self.user is not None:
                os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
            # the superuser is the compose file's user; every TCP login needs its password
            self._run(str(BINDIR / "initdb"), "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                      "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8", "--no-sync")
            pwfile.unlink()
        log = self.log.open("ab")
        self.process = subprocess.Popen(
            [str(BINDIR / "postgres"), "-D", str(self.data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
             "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root,
            **self._as_owner())  # type: ignore[call-overload]
        self._wait_ready()
        if not getattr(self, "_created", False):
            self._psql(f"CREATE DATABASE {DATABASE}")
            self._created = True
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"postgres exited with {self.process.returncode}:\n{self.server_log()}")
            try:
                done = subprocess.run([str(BINDIR / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                                      capture_output=True, timeout=10)
                if done.returncode == 0:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"postgres did not accept connections:\n{self.server_log()}")

    def _psql(self, sql: str) -> None:
        env = dict(os.environ, PGPASSWORD=PASSWORD)
        done = subprocess.run([str(BINDIR / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d",
                               "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True, text=True,
                              env=env, timeout=60)
        assert done.returncode == 0, done.stderr

    def server_log(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT: disconnects clients, rolls back their transactions)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)

    def restart(self) -> None:
        """Stop the server and start it again on the same port with the same data."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()
