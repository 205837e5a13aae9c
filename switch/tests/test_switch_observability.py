"""What the switch says of itself without a controller: its log, types with levels (runtime/log.h) set at start and
at run time, refusals logged bounded; and its own metrics endpoint (--metrics, runtime/metrics_http.h).

The same runtime serves jumbogate-nic; the switch is the program that starts quickest without ports to wire. Its
port is net_null, which receives a stream of zero-filled frames: counters move without a peer.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from prometheus_client.parser import text_string_to_metric_families
from switch_harness import SWITCH_BINARY

from jumbogate.pki import make_pki
from testlab import lab

TYPES = ("jumbogate.grpc", "jumbogate.port", "jumbogate.switch")


def start_switch(tmp_path, name: str, eal: list[str] = (), options: list[str] = ()) -> tuple[lab.Process, str, str]:
    prefix = f"jglog-{name}-{tmp_path.name}"[:40]
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    args = [SWITCH_BINARY, "--no-huge", "-m", "256", "--no-pci", "--file-prefix", prefix, "-l", "0-1", "--vdev=net_null0", *eal]
    args += ["--", "--port", "1=net_null0", "--grpc", address, *options]
    return lab.start_dpdk_service(args, tmp_path / f"{name}.log", address), prefix, address


def levels(prefix: str, params: str = "") -> dict:
    """{type: level}, or the command's {"error": why}."""
    reply = lab.telemetry_query(prefix, "/jumbogate/log_level" + (f",{params}" if params else ""))
    return reply if isinstance(reply, dict) else dict(entry.split(":") for entry in reply)


def test_levels_are_set_at_start_with_the_eal_option(tmp_path):
    process, prefix, _ = start_switch(tmp_path, "start", eal=["--log-level=jumbogate.port:warning", "--log-level=jumbogate.switch:debug"])
    try:
        assert levels(prefix) == {"jumbogate.grpc": "info", "jumbogate.port": "warning", "jumbogate.switch": "debug"}
    finally:
        process.stop()


def test_levels_change_at_run_time_and_a_bad_request_changes_nothing(tmp_path):
    process, prefix, _ = start_switch(tmp_path, "runtime")
    try:
        assert levels(prefix) == dict.fromkeys(TYPES, "info")
        assert levels(prefix, "jumbogate.*,debug") == dict.fromkeys(TYPES, "debug")
        assert levels(prefix, "jumbogate.grpc,err") == {"jumbogate.grpc": "err", "jumbogate.port": "debug", "jumbogate.switch": "debug"}
        assert "error" in levels(prefix, "jumbogate.*,loud")
        assert "error" in levels(prefix, "lib.eal,debug")  # not one of the program's types
        assert "error" in levels(prefix, "jumbogate.*")
        assert levels(prefix) == {"jumbogate.grpc": "err", "jumbogate.port": "debug", "jumbogate.switch": "debug"}
        # What is logged follows: the stop is a notice, which err would hide and debug shows.
        process.stop()
        assert re.search(r"jumbogate-switch: \w+: stopping", process.output())
    finally:
        process.stop()


def test_a_stop_is_not_logged_below_its_level(tmp_path):
    process, prefix, _ = start_switch(tmp_path, "quiet", eal=["--log-level=jumbogate.switch:warning"])
    process.stop()
    assert "stopping" not in process.output()


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki", {"switch": ["127.0.0.1"], "dashboard": []}, clients={"dashboard"})


def refused_calls(address: str, pki, count: int) -> None:
    """COUNT calls from a certificate the CA signed but --tls-allow does not name."""
    credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes(), pki["dashboard"].key.read_bytes(), pki["dashboard"].cert.read_bytes())
    with grpc.secure_channel(address, credentials) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        for _ in range(count):
            with pytest.raises(grpc.RpcError) as caught:
                stub.Capabilities(p4r.CapabilitiesRequest(), timeout=5)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_refused_calls_are_logged_at_most_five_lines_a_second_and_the_rest_counted(tmp_path, pki):
    tls = lab.ServerTls(pki["switch"].cert, pki["switch"].key, pki.ca, allow=("controller",))
    process, prefix, address = start_switch(tmp_path, "refusals", options=tls.soft_args())
    try:
        started = time.monotonic()
        refused_calls(address, pki, 40)
        burst = time.monotonic() - started
        lines = re.findall(r"call refused: the client certificate's DNS names \(dashboard\).*\((\d+) more refused", process.output())
        # Five a second at most, each second the burst touched.
        assert 1 <= len(lines) <= 5 * (int(burst) + 2), (burst, lines)
        time.sleep(1.1)
        refused_calls(address, pki, 1)
        lines = re.findall(r"call refused: .*\((\d+) more refused since the last such line\)", process.output())
        # Every refusal is either a line or counted in the next one.
        assert len(lines) + sum(int(n) for n in lines) == 41, lines
        # At err the refusal (a warning) is no longer logged.
        assert levels(prefix, "jumbogate.grpc,err")["jumbogate.grpc"] == "err"
        before = process.output().count("call refused")
        time.sleep(1.1)
        refused_calls(address, pki, 3)
        assert process.output().count("call refused") == before
    finally:
        process.stop()


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_metrics_endpoint_shows_the_data_path(tmp_path):
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "metrics", options=["--metrics", metrics])
    try:
        rx = (("direction", "rx"), ("interface", "net_null0"), ("port", "1"))
        first = lab.wait_until(lambda: (s := scrape(metrics)).get(("jumbogate_switch_port_packets_total", rx), 0) > 0 and s, "packets counted", 20)
        later = lab.wait_until(
            lambda: (s := scrape(metrics))[("jumbogate_switch_port_packets_total", rx)] > first[("jumbogate_switch_port_packets_total", rx)] and s,
            "the counter to move",
            20,
        )
        # Zero-filled frames are not Ethernet the program parses: dropped, and counted by reason.
        dropped = sum(v for (name, _), v in later.items() if name == "jumbogate_switch_drop_packets_total")
        assert dropped > 0
        assert later[("jumbogate_switch_p4runtime_streams", ())] == 0
        assert any(name == "jumbogate_switch_buffers_in_use" for name, _ in later)
        assert later[("jumbogate_switch_metrics_requests_total", (("outcome", "served"),))] >= 2
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://{metrics}/other", timeout=10)
        assert missing.value.code == 404
        assert scrape(metrics)[("jumbogate_switch_metrics_requests_total", (("outcome", "not_found"),))] == 1
    finally:
        process.stop()


def test_a_client_that_stalls_holds_the_endpoint_at_most_its_time_limit(tmp_path):
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "stall", options=["--metrics", metrics])
    try:
        host, port = metrics.split(":")
        with socket.create_connection((host, int(port))) as stalled:
            stalled.sendall(b"GET /metr")  # and nothing more
            started = time.monotonic()
            scrape(metrics)
            waited = time.monotonic() - started
        assert waited < 5, waited  # served beside it, and in any case within its 2 s to arrive
    finally:
        process.stop()


def drip(address: str, stop: threading.Event) -> threading.Thread:
    """A client that sends its request a byte every 0.5 s (each byte well within any per-read limit), until STOP."""
    host, port = address.split(":")
    connection = socket.create_connection((host, int(port)))

    def run():
        with connection:
            for byte in b"GET /metrics HTTP/1.0\r\nX-Pad: " + b"a" * 1000:
                if stop.wait(0.5):
                    return
                try:
                    connection.send(bytes([byte]))
                except OSError:  # the endpoint gave up on it
                    return

    connection.send(b"G")
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.5)  # accepted (the endpoint polls for connections every 0.2 s)
    return thread


def test_a_client_that_drips_its_request_holds_the_endpoint_and_the_stop_at_most_its_time_limit(tmp_path):
    metrics = f"127.0.0.1:{lab.free_tcp_port()}"
    process, _, _ = start_switch(tmp_path, "drip", options=["--metrics", metrics])
    stop = threading.Event()
    try:
        drip(metrics, stop)
        started = time.monotonic()
        scrape(metrics)
        waited = time.monotonic() - started
        assert waited < 5, waited  # 2 s for the whole request, however it trickles in
        drip(metrics, stop)
        started = time.monotonic()
        assert process.stop(timeout=15) == 0, process.output()
        stopping = time.monotonic() - started
        assert stopping < 5, stopping  # SIGTERM does not wait for the client either
    finally:
        stop.set()
        process.stop()


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1", "0x50", "80a"])
def test_a_metrics_port_out_of_range_is_refused(tmp_path, port):
    """getaddrinfo would take 99999 modulo 65536 and 0 as any port: the scrape would go elsewhere."""
    prefix = f"jgport-{tmp_path.name}"[:40]
    args = [SWITCH_BINARY, "--no-huge", "-m", "256", "--no-pci", "--file-prefix", prefix, "-l", "0-1"]
    args += ["--vdev=net_null0", "--", "--port", "1=net_null0", "--grpc", f"127.0.0.1:{lab.free_tcp_port()}", "--metrics", f"127.0.0.1:{port}"]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=20)
    finally:
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    assert done.returncode != 0
    assert f"metrics address '127.0.0.1:{port}': the port must be 1..65535" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # Decimal, as the NIC reads its numbers: a leading zero is no octal.
        (["--port", "010=net_null0", "--cpu-port", "010"], "P4 port 10 is the CPU port"),
        (["--cpu-port", "0776"], "--cpu-port takes a number from 0 to 510, got '0776'"),
        (["--device-id", "0x10"], "--device-id takes a number from 0 to 18446744073709551615, got '0x10'"),
        # strtoull skips blanks and negates after them.
        (["--device-id", " -1"], "--device-id takes a number from 0 to 18446744073709551615, got ' -1'"),
        (["--depth", "+8"], "--depth takes a number from 0 to 4096, got '+8'"),
    ],
)
def test_numbers_are_decimal_digits(options, message):
    done = subprocess.run([SWITCH_BINARY, "--no-huge", "--no-pci", "--", *options], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_metrics_are_refused_on_an_address_other_than_loopback(tmp_path):
    args = [SWITCH_BINARY, "--no-huge", "-m", "256", "--no-pci", "--file-prefix", f"jglog-refuse-{tmp_path.name}"[:40], "-l", "0-1"]
    args += ["--vdev=net_null0", "--", "--port", "1=net_null0", "--grpc", f"127.0.0.1:{lab.free_tcp_port()}", "--metrics", "0.0.0.0:9464"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "refusing metrics on '0.0.0.0:9464'" in done.stderr, done.stderr


def capabilities_as(address: str, pki, holder: str) -> grpc.StatusCode:
    credentials = grpc.ssl_channel_credentials(pki.ca.read_bytes(), pki[holder].key.read_bytes(), pki[holder].cert.read_bytes())
    with grpc.secure_channel(address, credentials) as channel:
        try:
            p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=5)
        except grpc.RpcError as e:
            return e.code()
    return grpc.StatusCode.OK


def test_renewed_tls_files_are_served_without_a_restart(tmp_path):
    """The certificate, key and CA are read again every --tls-reload-s: after the files are replaced (each renamed
    into place, as docs/operations.md says), new connections get the new set, and the old CA's clients are refused."""
    old = make_pki(tmp_path / "old", {"switch": ["127.0.0.1"], "controller": []}, clients={"controller"})
    new = make_pki(tmp_path / "new", {"switch": ["127.0.0.1"], "controller": []}, clients={"controller"})
    served = tmp_path / "served"
    served.mkdir()
    files = {"cert.pem": lambda p: p["switch"].cert, "key.pem": lambda p: p["switch"].key, "ca.pem": lambda p: p.ca}

    def install(pki) -> None:
        for name, source in files.items():
            (served / f".{name}").write_bytes(source(pki).read_bytes())
            (served / f".{name}").rename(served / name)

    install(old)
    tls = lab.ServerTls(served / "cert.pem", served / "key.pem", served / "ca.pem", allow=("controller",))
    process, _, address = start_switch(tmp_path, "reload", options=[*tls.soft_args(), "--tls-reload-s", "1"])
    try:
        assert capabilities_as(address, old, "controller") == grpc.StatusCode.OK
        assert capabilities_as(address, new, "controller") == grpc.StatusCode.UNAVAILABLE
        install(new)
        lab.wait_until(lambda: capabilities_as(address, new, "controller") == grpc.StatusCode.OK, "the renewed files to be served", 15)
        assert capabilities_as(address, old, "controller") == grpc.StatusCode.UNAVAILABLE
        assert process.running
    finally:
        process.stop()


def test_the_reload_interval_is_checked(tmp_path):
    args = [SWITCH_BINARY, "--no-huge", "--no-pci", "--", "--tls-reload-s", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--tls-reload-s is a number of seconds from 1 to 86400, got '0'" in done.stderr, done.stderr


def standard_services(address: str, credentials: grpc.ChannelCredentials | None = None) -> tuple[int, set[str]]:
    """The health status of the server as a whole, and the services reflection lists (what grpcurl asks)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        return status, set(ProtoReflectionDescriptorDatabase(channel).get_services())


def test_health_and_reflection_answer_and_only_to_allowed_callers(tmp_path, pki):
    from grpc_health.v1 import health_pb2

    process, _, address = start_switch(tmp_path, "services")
    try:
        status, services = standard_services(address)
        assert status == health_pb2.HealthCheckResponse.SERVING
        assert {"p4.v1.P4Runtime", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= services
    finally:
        process.stop()
    # With mutual TLS the identity check comes first: a certificate the CA signed for someone else gets nothing.
    tls = lab.ServerTls(pki["switch"].cert, pki["switch"].key, pki.ca, allow=("controller",))
    process, _, address = start_switch(tmp_path, "services-tls", options=tls.soft_args())
    try:
        dashboard = grpc.ssl_channel_credentials(pki.ca.read_bytes(), pki["dashboard"].key.read_bytes(), pki["dashboard"].cert.read_bytes())
        with pytest.raises(grpc.RpcError) as refused:
            standard_services(address, dashboard)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        process.stop()
