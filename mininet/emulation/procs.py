"""Processes of the emulation: starting them with a log, waiting until they answer, and the state file.

Every process the emulation starts is recorded in build/emulation/state.json
with a marker from its command line, so that `make stop` can end exactly
these processes after a crash without ending anyone else's (a recycled pid
whose command line lacks the marker is left alone).
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE_DIR = REPO / "build" / "emulation"
STATE_FILE = STATE_DIR / "state.json"
LOG_DIR = STATE_DIR / "logs"


class StartError(RuntimeError):
    """A part of the emulation did not come up; the message says which and where its log is."""


def load_state() -> dict:
    try:
        return json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}


def update_state(**changes) -> None:
    """Merge changes into the state file (written whole each time, so a crash leaves a readable file)."""
    state = load_state()
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(state.get(key), dict):
            state[key].update(value)
        else:
            state[key] = value
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(STATE_FILE)


def record_process(role: str, pid: int, marker: str) -> None:
    update_state(processes={role: {"pid": pid, "marker": marker}})


def log_path(role: str) -> Path:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    return LOG_DIR / f"{role}.log"


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_process(role: str, argv: list[str], marker: str, *, popen: Callable[..., subprocess.Popen] | None = None) -> subprocess.Popen:
    """Start argv with its output in logs/<role>.log and record it; popen runs it elsewhere (a Mininet host's namespace)."""
    log = log_path(role).open("wb")
    if popen is None:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
    else:
        proc = popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
    log.close()
    record_process(role, proc.pid, marker)
    return proc


def wait_until(what: str, ready: Callable[[], bool], *, timeout: float, proc: subprocess.Popen | None = None, role: str = "") -> None:
    """Poll ready() until it is true; fail early, with the log, if proc dies."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise StartError(f"{what}: the process exited with status {proc.returncode}; last lines of {log_path(role)}:\n{tail(log_path(role))}")
        if ready():
            return
        if time.monotonic() > deadline:
            log_hint = f"; last lines of {log_path(role)}:\n{tail(log_path(role))}" if role else ""
            raise StartError(f"{what}: not ready after {timeout:.0f}s{log_hint}")
        time.sleep(0.2)


def start_grpc_service(role: str, what: str, argv: list[str], marker: str, address: str, *, timeout: float, popen=None, credentials=None) -> subprocess.Popen:
    """Start a process that serves gRPC and return once address answers (never a fixed sleep).

    A DPDK program whose af_packet fanout id clashed with another's is
    started again (lab.AF_PACKET_FANOUT_CLASH), at most a few times.
    """
    from testlab.lab import AF_PACKET_FANOUT_CLASH, DPDK_START_ATTEMPTS

    for attempt in range(1, DPDK_START_ATTEMPTS + 1):
        proc = start_process(role, argv, marker, popen=popen)
        try:
            wait_until(f"{what} gRPC server on {address}", lambda: grpc_answers(address, credentials=credentials), timeout=timeout, proc=proc, role=role)
            return proc
        except StartError:
            stop_process(proc)
            if attempt == DPDK_START_ATTEMPTS or AF_PACKET_FANOUT_CLASH not in tail(log_path(role), 50):
                raise
    raise AssertionError("unreachable")


def grpc_answers(address: str, timeout: float = 0.5, credentials=None) -> bool:
    """True once a gRPC server accepts an HTTP/2 connection on address (with TLS: a handshake with these credentials)."""
    import grpc

    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def stop_process(proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def port_holder(port: int) -> str:
    """Who listens on a local TCP port, as 'name (pid N)', from ss; 'another process' when ss cannot say."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=False).stdout
    found = re.search(r'users:\(\("([^"]+)",pid=(\d+)', out)
    return f"{found.group(1)} (pid {found.group(2)})" if found else "another process"


def require_free_addresses(addresses: dict[str, str]) -> None:
    """Raise StartError naming the holder and the fix for the first of these host:port addresses something listens on.

    The rack's parts listen on fixed addresses (plan.py); a part that cannot
    bind otherwise fails later with a log to read instead of this line.
    """
    for what, address in addresses.items():
        host, port = address.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # Connections of an earlier run in TIME_WAIT do not stop a server binding.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, int(port)))
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    raise
                raise StartError(
                    f"{what} address {address} is in use by {port_holder(int(port))}: stop that process or free the port"
                    " (the rack's fixed addresses are in mininet/emulation/plan.py)"
                ) from None


def is_root() -> bool:
    return os.geteuid() == 0
