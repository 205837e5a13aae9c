"""The metrics endpoint (runtime/metrics_http.c) under clients that hold connections: it serves up to 16 at once,
each on its own deadline, so a scrape is answered while others drip their requests; past 16 the oldest still sending
its request is closed and counted (jumbogate_switch_metrics_connections_evicted_total).

The switch serves it here (as in test_switch_observability.py); jumbogate-nic runs the same code.
"""

from __future__ import annotations

import os
import resource
import select
import socket
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from test_switch_observability import start_switch

from testlab import lab

EVICTED = ("jumbogate_switch_metrics_connections_evicted_total", ())
BOUND = 16  # JG_METRICS_CONNECTIONS
DEADLINE_S = 2.0  # IO_TIMEOUT_S: each connection's time for its request to arrive


def timed_scrape(address: str) -> tuple[float, dict]:
    """Seconds a scrape took, and its samples. The timeout is long so that a slow answer is measured, not cut."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=60) as reply:
        text = reply.read().decode()
    waited = time.monotonic() - started
    return waited, {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def connect(address: str) -> socket.socket:
    host, port = address.split(":")
    return socket.create_connection((host, int(port)))


def drip_all(address: str, count: int, stop: threading.Event) -> list[threading.Thread]:
    """COUNT clients that each send their request a byte every 0.5 s, until STOP."""
    request = b"GET /metrics HTTP/1.0\r\nX-Pad: " + b"a" * 1000

    def run(connection: socket.socket):
        with connection:
            for byte in request:
                try:
                    connection.send(bytes([byte]))
                except OSError:  # the endpoint gave up on it
                    return
                if stop.wait(0.5):
                    return

    threads = [threading.Thread(target=run, args=(connect(address),), daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # all accepted, each a byte or two into its request
    return threads


def test_a_scrape_is_answered_at_once_while_clients_drip_their_requests(tmp_path):
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "drip8", options=["--metrics", metrics])
    stop = threading.Event()
    try:
        drip_all(metrics, 8, stop)
        waited, samples = timed_scrape(metrics)
        # One request at a time with 2 s each made it wait for all eight: 2 s x 8. Under one
        # connection's deadline, it waited for none of them (a bound on waiting, not a speed).
        assert waited < DEADLINE_S, waited
        assert samples[EVICTED] == 0
        # The drippers are still being read (none was answered, none evicted), and a second scrape is as quick.
        waited, _ = timed_scrape(metrics)
        assert waited < DEADLINE_S, waited
    finally:
        stop.set()
        process.stop()


def test_connections_past_the_bound_close_the_oldest_and_are_counted(tmp_path):
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "bound", options=["--metrics", metrics])
    held = []
    try:
        for _ in range(BOUND + 4):
            held.append(connect(metrics))
            held[-1].sendall(b"G")  # and nothing more
            time.sleep(0.01)  # accepted in this order
        time.sleep(0.3)  # all accepted, well within their 2 s
        waited, samples = timed_scrape(metrics)
        assert waited < DEADLINE_S, waited
        # Four made room for the last four held, one for the scrape: the five oldest.
        assert samples[EVICTED] == 5
        closed, _, _ = select.select(held, [], [], 0.2)
        assert sorted(held.index(c) for c in closed) == [0, 1, 2, 3, 4]
        for connection in closed:
            try:
                assert connection.recv(100) == b""  # closed unanswered
            except ConnectionResetError:  # closed with the unread "G" in its buffer
                pass
    finally:
        for connection in held:
            connection.close()
        process.stop()


def thread_cpu_ticks(pid: int) -> dict[int, int]:
    """Each thread's CPU time so far (user and system), in clock ticks."""
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended
            continue
        ticks[int(tid)] = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def busy_threads(pid: int, seconds: float) -> dict[int, float]:
    """The share of a core each thread took over SECONDS."""
    before = thread_cpu_ticks(pid)
    time.sleep(seconds)
    after = thread_cpu_ticks(pid)
    hz = os.sysconf("SC_CLK_TCK")
    return {tid: (after[tid] - before.get(tid, 0)) / hz / seconds for tid in after}


def socket_fds(pid: int) -> set[int]:
    return {int(fd) for fd in os.listdir(f"/proc/{pid}/fd") if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")}


def test_accepted_connections_are_close_on_exec(tmp_path):
    """A connection the endpoint accepted is not inherited by a program the switch runs."""
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "cloexec", options=["--metrics", metrics])
    pid = process.popen.pid
    try:
        before = socket_fds(pid)
        with connect(metrics):
            time.sleep(0.3)  # accepted
            accepted = socket_fds(pid) - before
            assert accepted, "no connection accepted"
            for fd in accepted:
                flags = next(line for line in open(f"/proc/{pid}/fdinfo/{fd}") if line.startswith("flags:"))
                assert int(flags.split()[1], 8) & os.O_CLOEXEC, f"fd {fd}: {flags.strip()}"
    finally:
        process.stop()


def test_out_of_descriptors_the_endpoint_waits_instead_of_spinning_and_recovers(tmp_path):
    """With no descriptor left for an accept (EMFILE), the connection stays queued and the listening socket readable:
    polled again at once, the endpoint's thread took a whole core. It leaves the socket alone for 100 ms at a time,
    and once descriptors are free again it accepts what waited and answers scrapes."""
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "emfile", options=["--metrics", metrics])
    pid = process.popen.pid
    held = []
    try:
        timed_scrape(metrics)  # serving
        # The threads busy anyway (the lcores poll their ports).
        polling = {tid for tid, share in busy_threads(pid, 1.0).items() if share > 0.3}
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        # No descriptor free below the limit: the next accept is EMFILE.
        highest = max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
        free_below = highest + 1 - len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (highest + 1, limits[1]))
        try:
            for _ in range(free_below + 3):
                held.append(connect(metrics))  # queued by the kernel, whether accepted or not
            time.sleep(0.3)
            shares = busy_threads(pid, 2.0)
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        spinning = {tid: share for tid, share in shares.items() if tid not in polling and share > 0.2}
        assert not spinning, f"threads spinning while accept fails: {spinning}"
        waited, _ = timed_scrape(metrics)
        assert waited < DEADLINE_S, waited
    finally:
        for connection in held:
            connection.close()
        process.stop()
