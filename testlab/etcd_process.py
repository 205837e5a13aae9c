"""A single-member etcd of its own (Debian's etcd-server), for tests and the emulation.

It listens on free loopback ports and keeps its data in a directory of its
own, so it never meets an etcd the machine may already run (Debian's
package starts one on 2379).

With `tls` it serves its clients over mutual TLS only (--client-cert-auth:
a client needs a certificate of the trusted CA), and etcdctl connects with
the client certificate `tls` names; `enable_auth` then turns etcd's users
and roles on, with that certificate's common name as the root user
(docs/fleet.md, "Mutual TLS and etcd's users").
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .lab import LabError, Process, free_tcp_port

ETCD = "etcd"
ETCDCTL = "etcdctl"


def missing_etcd() -> list[str]:
    return [tool for tool in (ETCD, ETCDCTL) if shutil.which(tool) is None]


def etcd_argv(name: str, data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    """A single-member etcd serving clients on `client_url`, its data in `data_dir`."""
    return [
        ETCD,
        "--name", name,
        "--data-dir", str(data_dir),
        "--listen-client-urls", client_url,
        "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url,
        "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"{name}={peer_url}",
        "--log-level", "warn",
        "--logger", "zap",
    ]  # fmt: skip


@dataclass(frozen=True)
class EtcdTls:
    """etcd's serving certificate and key, the CA its clients' certificates must chain to (and its own
    chains to), and the client certificate and key etcdctl uses (its common name: the etcd user it acts as)."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    def server_args(self) -> list[str]:
        return ["--cert-file", str(self.cert), "--key-file", str(self.key), "--trusted-ca-file", str(self.ca), "--client-cert-auth"]

    def client_args(self) -> list[str]:
        return ["--cacert", str(self.ca), "--cert", str(self.client_cert), "--key", str(self.client_key)]


def etcdctl(client_url: str, *args: str, stdin: str | None = None, tls: EtcdTls | None = None) -> subprocess.CompletedProcess:
    """etcdctl (v3 API) against one member; never raises for its exit status."""
    return subprocess.run(
        [ETCDCTL, "--endpoints", client_url, "--command-timeout=5s", *(tls.client_args() if tls else []), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=30,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    )


@dataclass
class EtcdServer:
    data_dir: Path
    log: Path
    name: str = "jumbogate"
    client_port: int = 0
    peer_port: int = 0
    tls: EtcdTls | None = None
    process: Process | None = field(default=None, repr=False)

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def store_url(self) -> str:
        """What the controller's --store takes."""
        return f"etcd://127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 30.0) -> EtcdServer:
        """Start (or restart from its data directory) and return once it serves reads."""
        self.client_port = self.client_port or free_tcp_port()
        self.peer_port = self.peer_port or free_tcp_port()
        args = etcd_argv(self.name, self.data_dir, self.client_url, f"http://127.0.0.1:{self.peer_port}")
        args += self.tls.server_args() if self.tls else []
        self.process = Process(args, self.log).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.running:
                raise LabError(f"etcd exited with {self.process.popen.returncode}:\n{self.process.output()[-2000:]}")
            if self.ctl("endpoint", "health", check=False).returncode == 0:
                return self
            time.sleep(0.1)
        self.stop()
        raise LabError(f"etcd did not become healthy on {self.client_url} within {timeout:.0f}s:\n{self.process.output()[-2000:]}")

    def ctl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        """etcdctl (v3 API) against this member."""
        done = etcdctl(self.client_url, *args, stdin=stdin, tls=self.tls)
        if check and done.returncode != 0:
            raise LabError(f"etcdctl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def enable_auth(self, root: str = "root") -> None:
        """Turn etcd's users and roles on, `root` (the common name of etcdctl's client certificate) its root user.

        A user made with --no-password can only be the common name of a client certificate."""
        self.ctl("user", "add", root, "--no-password")
        self.ctl("role", "add", "root")
        self.ctl("user", "grant-role", root, "root")
        self.ctl("auth", "enable")

    def grant(self, user: str, role: str, *prefixes: str) -> None:
        """A user (no password: a certificate's common name) with a role granting readwrite on each of `prefixes`."""
        self.ctl("role", "add", role)
        for prefix in prefixes:
            self.ctl("role", "grant-permission", role, "readwrite", prefix, "--prefix")
        self.ctl("user", "add", user, "--no-password")
        self.ctl("user", "grant-role", user, role)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
