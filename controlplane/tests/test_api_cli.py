"""The operator API served over real gRPC, driven through jumbogatectl.

The controller here has no switch or SmartNIC connected: the API answers from
its policy state, which is what it must do during an outage too.
"""

import asyncio
import json
import socket
import threading
from pathlib import Path

import grpc
import pytest

from jumbogate import cli
from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.server import serve
from jumbogate.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from testlab import lab

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"


def ctl(api, capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--controller", api.address, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_fleet_rule_through_the_api(api, capsys):
    code, out, _ = ctl(api, capsys, "fleet", "jumbo", "off")
    assert code == 0 and "fleet jumbo: off" in out
    code, out, _ = ctl(api, capsys, "--json", "instance", "list")
    assert code == 0
    instances = json.loads(out)["instances"]
    assert {i["id"]: i["effective_mtu"] for i in instances} == {"web-1": 1500, "legacy-1": 1500}

    code, _, err = ctl(api, capsys, "instance", "jumbo", "legacy-1", "on")
    assert code == cli.EXIT_REFUSED and "fleet jumbo flag is off" in err
    assert api.controller.state.instance_jumbo["legacy-1"] is False

    assert ctl(api, capsys, "fleet", "jumbo", "on")[0] == 0
    code, out, _ = ctl(api, capsys, "instance", "jumbo", "legacy-1", "on")
    assert code == 0 and "effective MTU 8500" in out
    code, out, _ = ctl(api, capsys, "instance", "show", "web-1")
    assert "8500" in out and "10.10.0.10" in out


def test_unknown_instance_is_not_found(api, capsys):
    code, _, err = ctl(api, capsys, "instance", "show", "ghost")
    assert code == cli.EXIT_NOT_FOUND and "ghost" in err


def test_path_show_fleet_on_a_lab_controller_says_it_keeps_no_fleet_store(api, capsys):
    code, _, err = ctl(api, capsys, "path", "show", "--fleet")
    assert code == cli.EXIT_REFUSED and "no fleet store" in err


def test_flows_onload_list_offload(api, capsys):
    code, out, _ = ctl(api, capsys, "flows", "onload", "203.0.113.7:40000", "10.10.0.10:5201", "--idle", "30")
    assert code == 0 and "idle timeout 30s" in out
    code, out, _ = ctl(api, capsys, "--json", "flows", "list")
    flows = json.loads(out)["flows"]
    assert len(flows) == 1 and flows[0]["flow"]["dst_port"] == 5201 and flows[0]["origin"] == "FLOW_ORIGIN_OPERATOR"
    assert flows[0]["on_nic"] is False, "no SmartNIC is connected"
    assert ctl(api, capsys, "flows", "offload", "203.0.113.7:40000", "10.10.0.10:5201")[0] == 0
    code, _, err = ctl(api, capsys, "flows", "offload", "203.0.113.7:40000", "10.10.0.10:5201")
    assert code == cli.EXIT_NOT_FOUND


def test_ineligible_and_malformed_flows_are_refused(api, capsys):
    code, _, err = ctl(api, capsys, "flows", "onload", "203.0.113.7:40000", "10.10.0.20:80")
    assert code == cli.EXIT_REFUSED and "not merge-eligible" in err
    code, _, err = ctl(api, capsys, "flows", "onload", "203.0.113.7:40000", "nonsense:80")
    assert code == cli.EXIT_USAGE and "dst_ip" in err
    code, _, err = ctl(api, capsys, "flows", "onload", "203.0.113.7", "10.10.0.10:80")
    assert code == cli.EXIT_USAGE and "ADDRESS:PORT" in err


def test_ipv6_flow_syntax(api, capsys):
    code, out, _ = ctl(api, capsys, "flows", "onload", "[2001:db8::7]:40000", "[fd00:10::10]:5201")
    assert code == 0 and "[fd00:10::10]:5201" in out


def test_stats_without_switch_or_nic(api, capsys):
    code, out, _ = ctl(api, capsys, "stats")
    assert code == 0 and "SmartNIC: unreachable" in out and "no drops" in out


def test_stats_prints_the_controllers_own_figures_the_docs_promise(api, capsys):
    """Admission, reconciliation and reloads (docs/controller.md, security.md), not only in --json."""
    api.controller.state.refuse_reload("a test's refusal")
    code, out, _ = ctl(api, capsys, "stats")
    assert code == 0
    max_flows = api.controller.config.elephant.max_flows
    assert f"merge path admission: 0 of {max_flows} flows; 0 elephants past the budget" in out
    assert "reconcile: 0 runs, 0 inserted, 0 modified, 0 deleted, 0 batches refused; policy version" in out
    assert "config reloads: 0 applied, 1 refused; last refusal: a test's refusal" in out


def test_watch_streams_policy_events(api, capsys):
    with grpc.insecure_channel(api.address) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        stream = stub.Watch(policy_pb2.WatchRequest(), timeout=10)
        stop = threading.Event()

        def flip_until_seen():
            # The server subscribes when the stream starts, which the client
            # cannot observe: keep changing the fleet flag until one is seen.
            jumbo = False
            while not stop.wait(0.2):
                stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=jumbo), timeout=5)
                jumbo = not jumbo

        flipper = threading.Thread(target=flip_until_seen, daemon=True)
        flipper.start()
        first = next(stream)
        stop.set()
        flipper.join(5)
        stream.cancel()
    # Which flip is seen first depends on when the server subscribed: its
    # value is checked by test_watch_events_carry_the_values_of_their_moment.
    assert first.kind == policy_pb2.EVENT_KIND_FLEET_CHANGED and first.HasField("fleet")


def test_watch_cli_stops_after_count(api, capsys):
    stop = threading.Event()

    def onload_until_stopped():
        with grpc.insecure_channel(api.address) as channel:
            stub = policy_pb2_grpc.PolicyStub(channel)
            port = 1000
            while not stop.wait(0.2):
                flow = common_pb2.FiveTuple(src_ip="203.0.113.9", dst_ip="10.10.0.10", protocol=6, src_port=port, dst_port=5201)
                stub.OnloadFlow(policy_pb2.OnloadFlowRequest(flow=flow), timeout=5)
                port += 1

    thread = threading.Thread(target=onload_until_stopped, daemon=True)
    thread.start()
    try:
        code, out, _ = ctl(api, capsys, "watch", "--count", "1", "--duration", "10")
    finally:
        stop.set()
        thread.join(5)
    assert code == 0 and out.count("\n") == 1 and "flow_onloaded" in out and "203.0.113.9:" in out


def test_unreachable_controller_says_so(capsys):
    code = cli.main(["--controller", f"127.0.0.1:{lab.free_tcp_port()}", "--timeout", "1", "fleet", "show"])
    _, err = capsys.readouterr()
    assert code == cli.EXIT_UNREACHABLE and "is jumbogate-controller running" in err


def test_listen_address_in_use_is_reported():
    async def go():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            address = f"127.0.0.1:{s.getsockname()[1]}"
            controller = Controller(load_config(EXAMPLE), Path("unused"), listen=address)
            with pytest.raises(OSError, match="cannot listen on"):
                await serve(controller.service, address)

    asyncio.run(go())


def test_watch_events_carry_the_values_of_their_moment():
    """Events read after the flags changed again still say what changed then."""
    controller = Controller(load_config(EXAMPLE), Path("unused"), listen="127.0.0.1:0")
    state, service = controller.state, controller.service
    instance = next(i.id for i in state.config.instances if i.jumbo)
    state.set_fleet(True)
    state.set_instance_jumbo(instance, False)
    state.set_fleet(False)
    state.set_fleet(True)
    state.set_instance_jumbo(instance, True)
    events = [service.event_to_pb(e) for e in state.events.history]
    fleet = [e.fleet.jumbo for e in events if e.HasField("fleet")]
    assert fleet[-2:] == [False, True]
    flags = [(e.instance.jumbo, e.instance.effective_mtu) for e in events if e.HasField("instance") and e.instance.id == instance]
    assert flags == [(False, 1500), (True, state.config.mtu.guest_jumbo)]


def test_the_controller_address_defaults_to_the_environment(api):
    import os
    import subprocess
    import sys

    env = dict(os.environ, JUMBOGATE_CONTROLLER=api.address)
    done = subprocess.run([sys.executable, "-m", "jumbogate.cli", "--json", "fleet", "show"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == cli.EXIT_OK, done.stderr
    assert "jumbo" in json.loads(done.stdout)


def test_an_unexpected_status_exits_5(capsys):
    """A server that is not a jumbogate controller answers UNIMPLEMENTED: 'other error'."""
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        code = cli.main(["--controller", f"127.0.0.1:{port}", "stats"])
        _, err = capsys.readouterr()
        assert code == cli.EXIT_ERROR == 5 and "unimplemented" in err
    finally:
        server.stop(0)


def test_udp_flows_reach_the_controller_as_udp(api, capsys):
    """--proto udp reaches the controller as UDP: toward a jumbo instance it is onloaded
    (the SmartNIC packs it into caravans), toward a legacy one refused as TCP is."""
    code, _, err = ctl(api, capsys, "flows", "onload", "203.0.113.7:40000", "10.10.0.20:5201", "--proto", "udp")
    assert code == cli.EXIT_REFUSED and "not merge-eligible" in err and "udp" in err
    code, out, _ = ctl(api, capsys, "--json", "flows", "onload", "203.0.113.7:40000", "10.10.0.10:5201", "--proto", "udp")
    assert code == cli.EXIT_OK and json.loads(out)["flow"]["protocol"] == 17
    code, _, _ = ctl(api, capsys, "flows", "onload", "203.0.113.7:40000", "10.10.0.10:5201", "--proto", "tcp")
    assert code == cli.EXIT_OK


def test_status_of_a_lab_controller_says_what_it_does_not_drive(api, capsys):
    """The file store answers always; with no switch and no SmartNIC answering, status says so instead of failing."""
    code, out, _ = ctl(api, capsys, "status")
    assert code == 0, out
    assert f"store     file:{EXAMPLE}: healthy (memory)" in out
    assert "election" not in out
    config = load_config(EXAMPLE)
    assert f"switch    {config.switch.p4runtime}: not connected" in out
    assert f"smartnic  {config.smartnic_control}: unreachable" in out
    code, out, _ = ctl(api, capsys, "--json", "status")
    shown = json.loads(out)
    assert shown["store"]["healthy"] is True and "election" not in shown and not shown["switch"].get("connected", False)
