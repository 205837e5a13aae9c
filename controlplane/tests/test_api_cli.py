"""The operator API served over real gRPC, driven through jumbogatectl.

The controller here has no switch or SmartNIC connected: the API answers from
its policy state, which is what it must do during an outage too.
"""

import asyncio
import contextlib
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


@pytest.mark.parametrize(
    "args",
    [
        ("flows", "onload", "10.0.0.1:99999999999", "10.10.0.10:80"),
        ("flows", "onload", "10.0.0.1:\u00b2", "10.10.0.10:80"),
        ("flows", "onload", "10.0.0.1:1", "10.10.0.10:80", "--idle", "-1"),
        ("flows", "onload", "10.0.0.1:1", "10.10.0.10:80", "--idle", str(1 << 32)),
        ("fleet", "jumbo", "on", "--revision", "-1"),
        ("fleet", "raise-epoch", "--to", "-5"),
    ],
    ids=["port-too-large", "superscript-digit", "negative-idle", "idle-past-32-bits", "negative-revision", "negative-epoch"],
)
def test_numbers_out_of_range_are_bad_input_not_a_traceback(api, capsys, args):
    """Each ended in a ValueError traceback and exit 1 ("refused"), where exit 2 is bad input."""
    with pytest.raises(SystemExit) if "--idle" in args or "--revision" in args or "--to" in args else contextlib.nullcontext() as exited:
        code, _, err = ctl(api, capsys, *args)
    if exited is not None:
        assert exited.value.code == cli.EXIT_USAGE and "whole number" in capsys.readouterr().err
    else:
        assert code == cli.EXIT_USAGE and "is not ADDRESS:PORT" in err


def test_config_export_to_a_path_it_cannot_write_is_bad_input(api, capsys, tmp_path):
    code, _, err = ctl(api, capsys, "config", "export", "-o", str(tmp_path / "missing" / "rack.yaml"))
    assert code == cli.EXIT_USAGE and "cannot write" in err and "No such file or directory" in err


def test_what_a_newer_controller_may_send_is_shown_not_a_traceback():
    """An event kind this jumbogatectl does not know, a time no clock shows, a destination that is not an address."""
    event = policy_pb2.Event(kind=99, time=1e300)
    assert cli.show_event(event).split()[:3] == ["-", "kind", "99"]
    flow = policy_pb2.MergeFlow(flow=common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.10", protocol=6, src_port=1, dst_port=2), onloaded_at=1e300)
    assert cli.show_flows([flow]).splitlines()[-1].split()[-1] == "-"
    assert sorted(["not-an-ip", "fd00::1", "10.0.0.2", "10.0.0.10"], key=cli._address_order) == ["10.0.0.2", "10.0.0.10", "fd00::1", "not-an-ip"]


def test_watch_piped_into_a_reader_that_stops_ends_quietly(api, tmp_path):
    """jumbogatectl --json watch | head -1: a BrokenPipeError traceback and exit 1 when head left."""
    import subprocess
    import sys

    ctl_path = Path(sys.executable).parent / "jumbogatectl"
    watch = subprocess.Popen([str(ctl_path), "--controller", api.address, "--json", "watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=watch.stdout, stdout=subprocess.PIPE)
    watch.stdout.close()
    lab.wait_until(lambda: api.controller.state.events.watchers == 1, "the watch subscribed", 20)
    # Events for the watch to print after head has gone.
    for jumbo in ("off", "on", "off", "on"):
        assert cli.main(["--controller", api.address, "fleet", "jumbo", jumbo]) == 0
    assert head.communicate(timeout=20)[0].count(b"\n") == 1
    for jumbo in ("off", "on"):
        cli.main(["--controller", api.address, "fleet", "jumbo", jumbo])
    _, err = watch.communicate(timeout=20)
    assert watch.returncode == cli.EXIT_OK and b"Traceback" not in err, err.decode()


def test_ctrl_c_before_the_answer_is_not_success_except_for_watch(api):
    """An import cut short by Ctrl-C exited 0, as if it had been made."""
    import signal
    import subprocess
    import sys

    ctl_path = Path(sys.executable).parent / "jumbogatectl"
    # A controller address that takes the connection and never answers: the call waits.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        for args, expected in ((["fleet", "jumbo", "off"], 130), (["watch"], cli.EXIT_OK)):
            target = address if args[0] != "watch" else api.address
            call = subprocess.Popen([str(ctl_path), "--controller", target, "--timeout", "60", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if args[0] == "watch":
                lab.wait_until(lambda: api.controller.state.events.watchers == 1, "the watch subscribed", 20)
            else:
                silent.settimeout(20)
                held = silent.accept()[0]  # it is in its call: connected, waiting for an answer that never comes
            call.send_signal(signal.SIGINT)
            _, err = call.communicate(timeout=20)
            if args[0] != "watch":
                held.close()
            assert call.returncode == expected, err.decode()
            assert b"Traceback" not in err


def test_tls_files_that_cannot_make_a_client_are_bad_input_not_an_unreachable_controller(api, capsys, tmp_path):
    """gRPC takes any bytes and fails at the handshake: a key file that is not a key read as "controller unreachable" (exit 4)."""
    from jumbogate.pki import make_pki

    pki = make_pki(tmp_path / "pki", {"ops": [], "other": []}, clients={"ops", "other"})
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("not a key\n")
    for cert, key, says in ((pki["ops"].cert, not_pem, "notes.txt"), (pki["ops"].cert, pki["other"].key, "is not the key of the certificate")):
        code, _, err = ctl(api, capsys, "--tls-ca", str(pki.ca), "--tls-cert", str(cert), "--tls-key", str(key), "fleet", "show")
        assert code == cli.EXIT_USAGE and "TLS files cannot be used" in err and says in err, err
