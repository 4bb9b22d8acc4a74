"""Fixtures: a real local cluster of tessera-worker processes on free loopback ports.

The cluster is described by a temporary YAML (two single-thread workers, like configs/local.yaml)
and started through the package itself (Cluster.up) with a private run directory (mode 0700) in
a temporary folder. The finaliser stops it with Cluster.down() and then signals, by pid, any
worker it started that is still alive, also when a test failed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

# Graph runs keep placements and run figures in the user's cache by default; these tests' go to
# a folder of their own (read when a graph call starts, so set before any runs).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tessera-test-cache-")

import tessera  # noqa: E402


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_cluster_yaml(folder: str, name: str, ports, secret: str = "python-test-secret") -> str:
    lines = [f"cluster: {name}", f"secret: {secret}", "nodes:"]
    for index, port in enumerate(ports):
        lines += [f"  - name: node{index + 1}", "    host: 127.0.0.1", f"    port: {port}", "    threads: 1",
                  "    kind: desktop"]
    path = os.path.join(folder, f"{name}.yaml")
    with open(path, "w") as file:
        file.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)  # an inline secret others can read is warned about
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_pids(pids) -> None:
    """SIGTERM, then SIGKILL after 3 s, each pid we started that is still a live process."""
    live = [pid for pid in pids if pid and _alive(pid)]
    for pid in live:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    while live and time.monotonic() < deadline:
        live = [pid for pid in live if _alive(pid)]
        time.sleep(0.05)
    for pid in live:
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def workdir():
    folder = tempfile.mkdtemp(prefix="tessera-pytest-")  # mode 0700
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class LocalCluster:
    """A started cluster: its YAML, run directory and the pids of the workers we started."""

    def __init__(self, workdir: str, name: str, nodes: int = 2):
        self.folder = os.path.join(workdir, name)
        os.mkdir(self.folder, 0o700)
        self.run_dir = os.path.join(self.folder, "run")
        os.mkdir(self.run_dir, 0o700)
        self.config = write_cluster_yaml(self.folder, name, [free_port() for _ in range(nodes)])
        self.cluster = tessera.Cluster(self.config, run_dir=self.run_dir)
        self.pids = []
        started = self.cluster.up()
        self.pids = [node["pid"] for node in started]

    def stop(self) -> None:
        try:
            self.cluster.down()
        finally:
            stop_pids(self.pids)


@pytest.fixture(scope="session")
def local(workdir):
    """A two-node local cluster with a quick profile, shared by the tests of the session."""
    started = LocalCluster(workdir, "pylocal")
    try:
        started.cluster.profile(quick=True)
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def cluster(local):
    return local.cluster


@pytest.fixture(scope="session")
def cli():
    """The `tessera` program to compare against (TESSERA_CLI, set by ctest), or skip."""
    path = os.environ.get("TESSERA_CLI") or shutil.which("tessera")
    if not path:
        pytest.skip("no tessera CLI to compare with (set TESSERA_CLI)")
    return path


def run_cli(cli: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([cli, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"{cli} {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result
