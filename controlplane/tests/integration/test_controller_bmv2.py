"""The real controller against a real simple_switch_grpc.

One switch and one controller per module; tests that restart either put
things back. The switch is read back by an independent P4Runtime client
(a backup with a lower election id), never through the controller.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import finsy as fy
import pytest
import yaml

from jumbogate import lab, translate
from jumbogate.config import load_config
from jumbogate.controller import read_managed
from jumbogate.reconcile import plan
from jumbogate.state import PolicyState

pytestmark = [pytest.mark.bmv2, pytest.mark.timeout(300)]

VENV_BIN = lab.REPO / ".venv" / "bin"
PORTS = {1: "external", 2: "external", 3: "internal", 4: "internal", 5: "nic"}


def rack_config(tmp: Path, veths: list[lab.VethPair], p4runtime: str, smartnic: str, listen: str) -> Path:
    """A rack matching the veths: switch port i is veth pair i-1."""

    def hop(port: int, dst_mac: str) -> dict:
        return {"port": port, "src_mac": veths[port - 1].mac(veths[port - 1].a), "dst_mac": dst_mac}

    config = {
        "fleet": {"jumbo": True},
        "switch": {
            "p4runtime": p4runtime,
            "pipeline": str(lab.PIPELINE_512),
            "icmp_rate_pps": 50,
            "ports": [{"port": n, "role": role} for n, role in PORTS.items()] + [{"port": 255, "role": "cpu"}],
        },
        "routes": [
            {"prefix": "0.0.0.0/0", "next_hops": [hop(1, "02:00:00:00:a0:01"), hop(2, "02:00:00:00:b0:01")]},
            {"prefix": "::/0", "next_hops": [hop(1, "02:00:00:00:a0:01"), hop(2, "02:00:00:00:b0:01")]},
            {"prefix": "10.10.0.10/32", "next_hops": [hop(3, "02:00:00:00:0a:0a")]},
            {"prefix": "10.10.0.20/32", "next_hops": [hop(4, "02:00:00:00:0a:14")]},
            {"prefix": "fd00:10::10/128", "next_hops": [hop(3, "02:00:00:00:0a:0a")]},
        ],
        "path_mtus": [{"prefix": "198.51.100.0/24", "mtu": 1400}],
        "instances": [
            {"id": "web-1", "addresses": ["10.10.0.10", "fd00:10::10"], "jumbo": True},
            {"id": "legacy-1", "addresses": ["10.10.0.20"], "jumbo": False},
        ],
        "merge_services": [{"prefix": "10.10.0.10/32", "ports": "5201-5210"}],
        "elephant": {"threshold_bytes": 20000, "idle_timeout_s": 2},
        "smartnic": {"control": smartnic},
        "controller": {"listen": listen},
    }
    path = tmp / "rack.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Rig:
    def __init__(self, tmp: Path, veths: list[lab.VethPair]):
        self.tmp = tmp
        self.switch = lab.Bmv2({n: veths[n - 1].a for n in PORTS}, tmp / "bmv2.log")
        self.switch.grpc_address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.api = f"127.0.0.1:{lab.free_tcp_port()}"
        self.config_path = rack_config(tmp, veths, self.switch.grpc_address, f"127.0.0.1:{lab.free_tcp_port()}", self.api)
        self.config = load_config(self.config_path)
        self.controller: lab.Process | None = None
        self.generation = 0

    def start_controller(self) -> None:
        self.generation += 1
        self.controller = lab.Process(
            [VENV_BIN / "jumbogate-controller", "--config", self.config_path, "--log-level", "INFO"], self.tmp / f"controller-{self.generation}.log"
        ).start()
        lab.wait_for_tcp(self.api, 20, process=self.controller.popen)

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([VENV_BIN / "jumbogatectl", "--controller", self.api, *args], capture_output=True, text=True, timeout=30)

    def stats(self) -> dict:
        done = self.ctl("--json", "stats")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def wait_for_reconcile(self, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = self.stats()
            if stats["switch_connected"] and int(stats["reconcile"]["runs"]) >= 1:
                return stats
            time.sleep(0.2)
        raise AssertionError(f"controller never reconciled; its log:\n{self.controller.output()[-3000:]}")

    def read_switch(self) -> tuple[list, fy.P4Schema]:
        """Read what reconciliation manages, with an independent backup client."""

        async def go():
            options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1)
            async with fy.Switch("reader", self.switch.grpc_address, options) as reader:
                return await read_managed(reader, PolicyState.from_config(self.config)), reader.p4info

        return asyncio.run(go())

    def desired_vs_switch(self, *, fleet: bool = True, nic_up: bool = False):
        state = PolicyState.from_config(self.config)
        state.fleet_jumbo = fleet
        actual, schema = self.read_switch()
        desired = [e.encode(schema) for e in translate.desired_entities(state, nic_up=nic_up)]
        return plan(desired, actual), actual


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    if not (lab.PIPELINE_512 / "jumbogate.json").exists():
        subprocess.run(["bash", str(lab.REPO / "p4src" / "compile.sh"), "512", str(lab.PIPELINE_512)], check=True)
    tmp = tmp_path_factory.mktemp("controller")
    with lab.veth_pairs("jgc", len(PORTS)) as veths:
        rig = Rig(tmp, veths)
        rig.switch.start()
        try:
            rig.start_controller()
            rig.wait_for_reconcile()
            yield rig
        finally:
            if rig.controller:
                rig.controller.stop()
            rig.switch.stop()


def test_initial_programming_is_read_back_from_the_switch(rig):
    result, actual = rig.desired_vs_switch()
    assert result.empty, f"switch differs from the config: {result.summary()}"
    kinds = {}
    for entity in actual:
        kinds[entity.WhichOneof("entity")] = kinds.get(entity.WhichOneof("entity"), 0) + 1
    # 5 roles + 5 routes + 5 next_hops + 3 instances(v4,v6) + 2 path MTUs + defaults ...
    assert kinds["action_profile_member"] == 8 and kinds["action_profile_group"] == 5
    assert kinds["table_entry"] >= 5 + 5 + 5 + 3 + 3


def test_fleet_flag_reaches_the_switch_within_a_second(rig):
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    try:
        deadline = time.monotonic() + 1.0
        while True:
            result, _ = rig.desired_vs_switch(fleet=False)
            if result.empty:
                break
            assert time.monotonic() < deadline, f"switch not updated within 1 s: {result.summary()}"
        refused = rig.ctl("instance", "jumbo", "legacy-1", "on")
        assert refused.returncode == 1 and "fleet jumbo flag is off" in refused.stderr
    finally:
        assert rig.ctl("fleet", "jumbo", "on").returncode == 0
    deadline = time.monotonic() + 2.0
    while not rig.desired_vs_switch()[0].empty:
        assert time.monotonic() < deadline


def test_controller_restart_writes_nothing(rig):
    before, _ = rig.read_switch()
    rig.controller.stop()
    rig.start_controller()
    stats = rig.wait_for_reconcile()
    totals = stats["reconcile"]
    assert (int(totals["inserted"]), int(totals["modified"]), int(totals["deleted"])) == (0, 0, 0), totals
    after, _ = rig.read_switch()
    assert sorted(e.SerializeToString(deterministic=True) for e in before) == sorted(e.SerializeToString(deterministic=True) for e in after)
    assert "ALREADY_EXISTS" not in rig.controller.output()


def test_switch_restart_converges(rig):
    rig.switch.stop()
    rig.switch.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            if rig.desired_vs_switch()[0].empty:
                break
        except Exception as err:  # the pipeline may not be back yet
            last = err
        else:
            last = None
        assert time.monotonic() < deadline, f"no convergence after switch restart ({last}); controller log:\n{rig.controller.output()[-3000:]}"
        time.sleep(0.3)
    log = rig.controller.output()
    assert "ALREADY_EXISTS" not in log and "Traceback" not in log
