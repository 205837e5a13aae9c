"""jumbogate-controller as an operator runs it: its flags and exit codes."""

import contextlib
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testlab import lab

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "controlplane" / "rack.example.yaml"
PIPELINE = REPO / "p4src" / "compiled" / "depth256"
CONTROLLER = Path(sys.executable).parent / "jumbogate-controller"
CTL = Path(sys.executable).parent / "jumbogatectl"

pytestmark = pytest.mark.timeout(60)


def controller(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONTROLLER), *args], capture_output=True, text=True, timeout=30)


def test_a_bad_config_exits_2_naming_file_and_field(tmp_path):
    bad = tmp_path / "rack.yaml"
    bad.write_text(EXAMPLE.read_text().replace("guest_jumbo: 8500", "guest_jumbo: 9300"))
    result = controller("--config", str(bad), "--pipeline", str(PIPELINE))
    assert result.returncode == 2, result.stderr
    assert f"jumbogate-controller: {bad}: mtu.guest_jumbo" in result.stderr, result.stderr


def test_no_pipeline_or_a_missing_file_exits_2(tmp_path):
    no_pipeline = tmp_path / "rack.yaml"
    no_pipeline.write_text("".join(line for line in EXAMPLE.read_text().splitlines(keepends=True) if "pipeline:" not in line))
    result = controller("--config", str(no_pipeline))
    assert result.returncode == 2 and "no pipeline: pass --pipeline" in result.stderr, result.stderr
    result = controller("--config", str(EXAMPLE), "--pipeline", str(tmp_path))
    assert result.returncode == 2 and "pipeline file missing" in result.stderr and "jumbogate.json" in result.stderr, result.stderr


def test_an_unknown_log_level_is_a_usage_error():
    result = controller("--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--log-level", "LOUD")
    assert result.returncode == 2 and "--log-level" in result.stderr, result.stderr


@contextlib.contextmanager
def serving_controller(tmp_path: Path, *flags: str):
    """jumbogate-controller on a free address with `flags`, logging to tmp_path/controller.log, once jumbogatectl
    gets an answer from it; yields (address, log, process) and stops it with SIGTERM after."""
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    log = tmp_path / "controller.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(CONTROLLER), "--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--listen", address, *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        serving = [str(CTL), "--controller", address, "--timeout", "1", "fleet", "show"]
        lab.wait_until(lambda: subprocess.run(serving, capture_output=True).returncode == 0, "the controller to serve", 20)
        yield address, log, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


def test_listen_log_level_and_a_clean_stop(tmp_path):
    """--listen overrides controller.listen, --log-level DEBUG is obeyed,
    SIGTERM stops it with 0; an address in use exits 1 with the reason."""
    with serving_controller(tmp_path, "--log-level", "DEBUG") as (address, log, proc):
        assert "DEBUG" in log.read_text(), "--log-level DEBUG prints debug lines"

        # gRPC's default SO_REUSEPORT would let a second controller bind
        # the same address and take half the calls: it must refuse instead.
        busy = controller("--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--listen", address)
        assert busy.returncode == 1 and "cannot listen on" in busy.stderr, busy.stderr
    assert proc.returncode == 0, log.read_text()
    assert "stopping" in log.read_text()


def test_log_format_json_writes_one_object_per_line(tmp_path):
    """--log-format json: every line the controller writes is one JSON object with time, level, logger and message."""
    with serving_controller(tmp_path, "--log-format", "json") as (_, log, _):
        pass
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines and all(set(line) >= {"time", "level", "logger", "message"} for line in lines), lines
    assert any(line["logger"].startswith("jumbogate") for line in lines) and lines[-1]["message"] == "stopping"
    assert all(line["time"].endswith("Z") and "T" in line["time"] for line in lines)


def test_a_metrics_address_in_use_exits_1_with_the_reason(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "rack.yaml"
        config.write_text(EXAMPLE.read_text().replace("  listen: 127.0.0.1:50051", f"  listen: 127.0.0.1:{lab.free_tcp_port()}\n  metrics: 127.0.0.1:{port}"))
        result = controller("--config", str(config), "--pipeline", str(PIPELINE))
    assert result.returncode == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr, result.stderr


def test_an_unreachable_store_exits_1_with_one_line_naming_it():
    url = f"etcd://127.0.0.1:{lab.free_tcp_port()}"
    result = controller("--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--store", url)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("jumbogate-controller:")]
    assert len(lines) == 1 and url in lines[0] and "check that etcd runs" in lines[0], result.stderr


def test_a_malformed_store_address_or_rack_name_exits_2():
    result = controller("--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--store", "etcd://nowhere")
    assert result.returncode == 2 and "is not HOST:PORT" in result.stderr, result.stderr
    result = controller("--config", str(EXAMPLE), "--pipeline", str(PIPELINE), "--store", "etcd://127.0.0.1:1", "--rack", "a/b")
    assert result.returncode == 2 and "rack 'a/b'" in result.stderr, result.stderr


def test_tls_files_the_start_would_refuse_fail_validate_and_the_start_exits_2(tmp_path):
    """config validate said "valid" (exit 0) for a key that is not the certificate's; the start then
    refused it with exit 1, which the unit restarts on forever."""
    from jumbogate.pki import make_pki

    pki = make_pki(tmp_path / "pki", {"controller": ["127.0.0.1"], "ops-oncall": []}, clients={"controller", "ops-oncall"})
    tls = f"tls:\n  ca: {pki.ca}\n  cert: {pki['controller'].cert}\n  key: {pki['ops-oncall'].key}\n  roles:\n    admin: [ops-oncall]\n"
    config = tmp_path / "rack.yaml"
    config.write_text(EXAMPLE.read_text() + "\n" + tls)
    validate = subprocess.run([str(CTL), "config", "validate", str(config), "--pipeline", str(PIPELINE)], capture_output=True, text=True, timeout=30)
    assert validate.returncode == 2 and "is not the key of the certificate" in validate.stderr, validate.stdout + validate.stderr
    result = controller("--config", str(config), "--pipeline", str(PIPELINE))
    assert result.returncode == 2 and "TLS files cannot be used" in result.stderr, result.stderr
    config.write_text(EXAMPLE.read_text() + "\n" + tls.replace(str(pki["ops-oncall"].key), str(pki["controller"].key)))
    validate = subprocess.run([str(CTL), "config", "validate", str(config), "--pipeline", str(PIPELINE)], capture_output=True, text=True, timeout=30)
    assert validate.returncode == 0, validate.stderr
