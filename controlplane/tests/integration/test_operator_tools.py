"""The operator's tools against the real controller process, switch and SmartNIC.

jumbogate-switch and jumbogate-nic run on null DPDK ports (no traffic: the
control paths are what is tested), jumbogate-controller programs the one and
drives the other, and the operator uses the installed jumbogatectl, grpcio's
health client and server reflection, as grpcurl or grpc_health_probe would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from testlab import lab

pytestmark = [pytest.mark.timeout(300)]

VENV_BIN = lab.REPO / ".venv" / "bin"
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
# Named as an operator would in rack.yaml; the CLI shows these names.
PORTS = [
    {"port": 1, "name": "uplink-a", "role": "external"},
    {"port": 2, "name": "uplink-b", "role": "external"},
    {"port": 3, "name": "sled-1", "role": "internal"},
    {"port": 4, "role": "internal"},
    {"port": 5, "name": "smartnic", "role": "nic"},
    {"port": 255, "name": "cpu", "role": "cpu"},
]


def rack(p4runtime: str, nic: str, listen: str) -> dict:
    hop = {"port": 1, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:02"}
    return {
        "fleet": {"jumbo": True},
        "mtu": {"guest_jumbo": 8000, "default_external": 1500},
        "switch": {"p4runtime": p4runtime, "pipeline": str(lab.PIPELINE_512), "ports": PORTS},
        "routes": [
            {"prefix": "0.0.0.0/0", "next_hops": [hop]},
            {"prefix": "10.10.0.10/32", "next_hops": [{"port": 3, "src_mac": "02:00:00:00:00:03", "dst_mac": "02:00:00:00:0a:0a"}]},
        ],
        "instances": [{"id": "web-1", "addresses": ["10.10.0.10"], "jumbo": True}],
        "merge_services": [{"prefix": "10.10.0.10/32", "ports": "5201-5210"}],
        "smartnic": {"control": nic, "internal_prefixes": ["10.10.0.0/24"]},
        "controller": {"listen": listen},
    }


NIC_PREFIX = f"jgops-nic{os.getpid()}"


def start_null_nic(tmp: Path, address: str) -> lab.Process:
    args = [lab.NIC, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", NIC_PREFIX, "--vdev=net_null0,no-rx=1", "-l", "0-1"]
    return lab.start_dpdk_service([*args, "--", "--grpc", address], tmp / "nic.log", address)


def null_switch(tmp: Path) -> lab.SoftSwitch:
    numbers = [p["port"] for p in PORTS if p["role"] != "cpu"]
    return lab.SoftSwitch({}, tmp / "switch.log", devices={n: f"net_null{n}" for n in numbers}, vdevs=tuple(f"net_null{n},no-rx=1" for n in numbers))


class Rig:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        for binary in (lab.NIC, lab.SOFT_SWITCH):
            if not binary.exists():
                pytest.fail(f"{binary} is missing; run 'make setup'")
        self.switch = null_switch(tmp)
        self.switch.grpc_address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.nic_address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.api = f"127.0.0.1:{lab.free_tcp_port()}"
        self.config = rack(self.switch.grpc_address, self.nic_address, self.api)
        self.config_path = tmp / "rack.yaml"
        self.write_config(self.config)
        self.nic: lab.Process | None = None
        self.controller: lab.Process | None = None

    def write_config(self, config: dict) -> None:
        self.config_path.write_text(yaml.safe_dump(config))

    def start(self) -> None:
        self.switch.start()
        self.nic = start_null_nic(self.tmp, self.nic_address)
        self.controller = lab.Process([VENV_BIN / "jumbogate-controller", "--config", self.config_path], self.tmp / "controller.log").start()
        lab.wait_for_tcp(self.api, 20, process=self.controller.popen)

    def stop(self) -> None:
        for part in (self.controller, self.nic):
            if part:
                part.stop()
        self.switch.stop()
        shutil.rmtree(f"/var/run/dpdk/{NIC_PREFIX}", ignore_errors=True)

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([VENV_BIN / "jumbogatectl", "--controller", self.api, *args], capture_output=True, text=True, timeout=60)

    def json(self, *args: str) -> dict:
        done = self.ctl("--json", *args)
        assert done.returncode == EXIT_OK, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = Rig(tmp_path_factory.mktemp("operator-tools"))
    try:
        rig.start()
        lab.wait_until(lambda: (s := rig.json("stats"))["switch_connected"] and s["nic"]["reachable"], "the switch and the SmartNIC", 60)
        yield rig
    finally:
        rig.stop()


def test_both_programs_say_their_version_from_the_package_metadata():
    from importlib.metadata import version

    expected = version("jumbogate")
    for program in ("jumbogatectl", "jumbogate-controller"):
        done = subprocess.run([VENV_BIN / program, "--version"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{program} {expected}"


def test_the_help_lists_every_exit_code_and_how_to_complete():
    done = subprocess.run([VENV_BIN / "jumbogatectl", "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    for code in range(8):
        assert f"\n  {code}  " in done.stdout, code
    assert "jumbogatectl completion bash" in done.stdout


def test_completion_code_for_bash_and_the_completions_it_gets(tmp_path):
    done = subprocess.run([VENV_BIN / "jumbogatectl", "completion", "bash"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "complete " in done.stdout and "jumbogatectl" in done.stdout
    # What bash's completion function does: argcomplete's protocol, through the real program.
    out = tmp_path / "completions"
    env = dict(os.environ, _ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE="jumbogatectl nic ", COMP_POINT="17", COMP_TYPE="9")
    with open(out, "wb") as fd8, open(os.devnull, "wb") as fd9:
        subprocess.run(
            ["bash", "-c", f"exec 8>&{fd8.fileno()} 9>&{fd9.fileno()}; exec {VENV_BIN / 'jumbogatectl'}"],
            env=env,
            pass_fds=(fd8.fileno(), fd9.fileno()),
            timeout=30,
            capture_output=True,
        )
    assert set(out.read_text().split()) - {"-h", "--help"} == {"stats", "config", "flows"}


def test_config_validate_passes_a_good_file_without_a_controller(rig):
    done = subprocess.run([VENV_BIN / "jumbogatectl", "config", "validate", rig.config_path], capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_OK, done.stderr
    assert "valid (6 ports, 1 instances, 2 routes)" in done.stdout


def test_config_validate_names_each_problem_and_exits_2(tmp_path, rig):
    bad = dict(rig.config, mtu={"guest_jumbo": 80000, "default_external": 1500})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    done = subprocess.run([VENV_BIN / "jumbogatectl", "config", "validate", path], capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_USAGE and "mtu.guest_jumbo" in done.stderr, done.stderr
    # Valid as a file, but no controller could start with it: both reasons are said, a line each.
    unstartable = dict(rig.config, controller={"listen": "192.0.2.1:50051"})
    unstartable["switch"] = dict(rig.config["switch"], pipeline=str(tmp_path / "no-pipeline"))
    path.write_text(yaml.safe_dump(unstartable))
    done = subprocess.run([VENV_BIN / "jumbogatectl", "--json", "config", "validate", path], capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_USAGE
    shown = json.loads(done.stdout)
    assert shown["valid"] is False and len(shown["problems"]) == 2
    assert "pipeline file missing" in shown["problems"][0] and "refusing plaintext operator API on 192.0.2.1:50051" in shown["problems"][1]
    # The controller refuses to start with that file for the first of them.
    started = subprocess.run([VENV_BIN / "jumbogate-controller", "--config", path], capture_output=True, text=True, timeout=30)
    assert started.returncode == 2 and "pipeline file missing" in started.stderr


def test_config_reload_applies_the_file_and_refuses_a_change_that_needs_a_restart(rig):
    try:
        rig.write_config(dict(rig.config, instances=[{"id": "web-1", "addresses": ["10.10.0.10"], "jumbo": False}], fleet={"jumbo": False}))
        done = rig.ctl("config", "reload")
        assert done.returncode == EXIT_OK, done.stderr
        assert "fleet.jumbo" in done.stdout and "instances" in done.stdout
        assert rig.json("fleet", "show")["jumbo"] is False
        rig.write_config(dict(rig.config, smartnic=dict(rig.config["smartnic"], control=f"127.0.0.1:{lab.free_tcp_port()}")))
        done = rig.ctl("config", "reload")
        assert done.returncode == EXIT_REFUSED and "smartnic.control changed, which needs a restart" in done.stderr, done.stderr
        assert rig.json("fleet", "show")["jumbo"] is False
        reloads = rig.json("stats")["config_reloads"]
        assert int(reloads["applied"]) >= 1 and int(reloads["refused"]) >= 1 and "smartnic.control" in reloads["last_refusal"]
    finally:
        rig.write_config(rig.config)
        assert rig.ctl("config", "reload").returncode == EXIT_OK
    assert rig.json("fleet", "show")["jumbo"] is True


def test_sighup_still_reloads(rig):
    applied = int(rig.json("stats")["config_reloads"].get("applied", 0))
    os.kill(rig.controller.popen.pid, signal.SIGHUP)
    lab.wait_until(lambda: int(rig.json("stats")["config_reloads"].get("applied", 0)) > applied, "the SIGHUP's reload", 10)


def test_nic_commands_read_the_smartnic_through_the_controller(rig):
    config = rig.json("nic", "config")
    assert config["internal_mtu"] == 8000 and config["default_path_mtu_v4"] == 1500
    assert [p["cidr"] for p in config["internal_prefixes"]] == ["10.10.0.0/24"]
    shown = rig.ctl("nic", "config")
    assert shown.returncode == EXIT_OK and "internal MTU         8000" in shown.stdout and "10.10.0.0/24" in shown.stdout

    stats = rig.json("nic", "stats")
    assert "packets_in" in stats and "fence" in stats
    shown = rig.ctl("nic", "stats")
    assert shown.returncode == EXIT_OK and shown.stdout.startswith("packets ") and "no drops" in shown.stdout

    assert rig.ctl("nic", "flows").stdout.strip() == "the SmartNIC holds no flows"
    assert rig.ctl("flows", "onload", "203.0.113.7:40000", "10.10.0.10:5201").returncode == EXIT_OK
    try:
        flows = lab.wait_until(lambda: rig.json("nic", "flows").get("flows"), "the flow on the SmartNIC", 10)
        assert [(f["flow"]["src_ip"], f["flow"]["dst_port"]) for f in flows] == [("203.0.113.7", 5201)]
        assert "tcp 203.0.113.7:40000 -> 10.10.0.10:5201" in rig.ctl("nic", "flows").stdout
    finally:
        rig.ctl("flows", "offload", "203.0.113.7:40000", "10.10.0.10:5201")


def test_nic_commands_say_when_the_smartnic_is_unreachable(tmp_path):
    """A controller whose SmartNIC does not answer: UNAVAILABLE, exit 4, and the message says which part is missing."""
    api = f"127.0.0.1:{lab.free_tcp_port()}"
    path = tmp_path / "rack.yaml"
    path.write_text(yaml.safe_dump(rack(f"127.0.0.1:{lab.free_tcp_port()}", f"127.0.0.1:{lab.free_tcp_port()}", api)))
    controller = lab.Process([VENV_BIN / "jumbogate-controller", "--config", path], tmp_path / "controller.log").start()
    try:
        lab.wait_for_tcp(api, 20, process=controller.popen)
        done = subprocess.run([VENV_BIN / "jumbogatectl", "--controller", api, "nic", "stats"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 4 and "the SmartNIC at" in done.stderr and "not reachable" in done.stderr, done.stderr
    finally:
        controller.stop()


def test_health_says_not_serving_to_its_watchers_when_the_controller_stops(tmp_path):
    """A controller told to stop (SIGTERM) first tells health watchers, as a load balancer's, to go elsewhere."""
    api = f"127.0.0.1:{lab.free_tcp_port()}"
    path = tmp_path / "rack.yaml"
    path.write_text(yaml.safe_dump(rack(f"127.0.0.1:{lab.free_tcp_port()}", f"127.0.0.1:{lab.free_tcp_port()}", api)))
    controller = lab.Process([VENV_BIN / "jumbogate-controller", "--config", path], tmp_path / "controller.log").start()
    try:
        lab.wait_for_tcp(api, 20, process=controller.popen)
        with grpc.insecure_channel(api) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service="jumbogate.v1.Policy"), timeout=30)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            os.kill(controller.popen.pid, signal.SIGTERM)
            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert controller.popen.wait(20) == 0
    finally:
        controller.stop()


def test_stats_name_the_ports_as_rack_yaml_does(rig):
    shown = rig.ctl("stats")
    assert shown.returncode == EXIT_OK, shown.stderr
    rows = {line.strip().split("  ")[0] for line in shown.stdout.splitlines()}
    assert {"1 (uplink-a)", "2 (uplink-b)", "3 (sled-1)", "4", "5 (smartnic)"} <= rows, shown.stdout
    ports = rig.json("stats")["ports"]
    assert {p["port"]: p["name"] for p in ports} == {1: "uplink-a", 2: "uplink-b", 3: "sled-1", 4: "", 5: "smartnic", 255: "cpu"}


def test_watch_json_prints_one_object_a_line(rig):
    stop = threading.Event()

    def flip():
        jumbo = False
        while not stop.wait(0.3):
            rig.ctl("fleet", "jumbo", "on" if jumbo else "off")
            jumbo = not jumbo

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        done = rig.ctl("--json", "watch", "--count", "3", "--duration", "30")
    finally:
        stop.set()
        flipper.join(10)
        rig.ctl("fleet", "jumbo", "on")
    assert done.returncode == EXIT_OK, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    events = [json.loads(line) for line in lines]
    assert all(e["kind"].startswith("EVENT_KIND_") for e in events)


def test_health_and_reflection_answer_on_the_operator_api(rig):
    with grpc.insecure_channel(rig.api) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "jumbogate.v1.Policy"):
            assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        # What grpcurl does: list the services, then describe one from the descriptors the server sends.
        database = ProtoReflectionDescriptorDatabase(channel)
        assert {"jumbogate.v1.Policy", "grpc.health.v1.Health"} <= set(database.get_services())
        pool = descriptor_pool.DescriptorPool(database)
        policy = pool.FindServiceByName("jumbogate.v1.Policy")
        assert {"GetStatus", "ReloadConfig", "GetNicStats"} <= {m.name for m in policy.methods}
        assert pool.FindMessageTypeByName("jumbogate.v1.NicStats").fields_by_name["fence"]


# make setup builds grpcurl into build/tools/ where Go is installed.
GRPCURL = shutil.which("grpcurl") or shutil.which("grpcurl", path=str(Path(__file__).resolve().parents[3] / "build" / "tools"))


@pytest.mark.skipif(GRPCURL is None, reason="grpcurl is not installed (make setup builds it with Go into build/tools/)")
def test_grpcurl_lists_the_services(rig):
    done = subprocess.run([GRPCURL, "-plaintext", rig.api, "list"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "jumbogate.v1.Policy" in done.stdout
