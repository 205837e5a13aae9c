"""Starting, refusing to start, and stopping jumbogate-nic."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time

import grpc
import pytest

from jumbogate.v1 import common_pb2, nic_pb2
from testlab.nic_harness import NIC_BINARY, NULL_PORT, Netns, SinglePort, free_tcp_port, remove_runtime_dir, start_nic, veth
from testlab.nic_packets import tcp_segments
from testlab.portbench import xdp_unavailable

pytestmark = pytest.mark.timeout(90)


def run_nic(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NIC_BINARY), *args], capture_output=True, text=True, timeout=30)


def fails_with(log_dir, eal: list[str], options: list[str], message: str, grpc_address: str | None = None) -> str:
    nic = start_nic(eal, options, None, log_dir, grpc_address=grpc_address, wait_ready=False)
    try:
        nic.proc.wait(timeout=30)
    finally:
        nic.stop(signal.SIGKILL)
    assert nic.proc.returncode != 0, nic.log()
    assert message in nic.log(), nic.log()
    return nic.log()


def test_help_explains_usage_and_options():
    result = run_nic("--help")
    assert result.returncode == 0
    for text in ("Usage:", "--internal-prefix", "--grpc", "--config", "--return-port", "SIGTERM"):
        assert text in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), "help is wrapped to 80 columns"
    assert run_nic("--version").stdout.startswith("jumbogate-nic ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "--bogus"], "unknown option '--bogus'"),
        (["--", "--internal-mtu", "99999"], "--internal-mtu '99999': expected a whole number 1280..9216"),
        (["--", "--internal-prefix", "10.0.0.1/8"], "host bits"),
        (["--", "--path-mtu", "10.0.0.0/8"], "expected CIDR=BYTES"),
        (["--", "--merge-unknown-flows", "maybe"], "expected on or off"),
        (["--", "--internal-mtu"], "--internal-mtu needs BYTES"),
        (["--", "--config", "/nonexistent/nic.conf"], "cannot read config file /nonexistent/nic.conf"),
        (["--", "--port-mtu", "=1500"], "--port-mtu '=1500': expected BYTES or PORT=BYTES"),
        (["--", "--port-mtu", "net_af_xdp0=99"], "--port-mtu '99': expected a whole number 1280..9216"),
        (["--", "--port-mtu", "a=1500", "--port-mtu", "a=1400"], "--port-mtu: port 'a' is given twice"),
        (["--", "--port-mtu", "1500"], "must not exceed the largest --port-mtu, 1500"),
        # A flag takes no value: "--insecure=false" would otherwise turn plaintext on.
        (["--", "--insecure=false"], "--insecure takes no value"),
        (["--", "--insecure="], "--insecure takes no value"),
        (["--", "--internal-mtu", " 9000"], "--internal-mtu ' 9000': expected a whole number 1280..9216"),
        (["--", "--internal-mtu", "+9000"], "--internal-mtu '+9000': expected a whole number 1280..9216"),
    ],
)
def test_bad_options_are_named_before_dpdk_starts(args, message):
    result = run_nic(*args)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "EAL" not in result.stderr


def test_missing_port_is_named(log_dir):
    fails_with(log_dir, NULL_PORT, ["--port", "net_af_packet7"], "port 'net_af_packet7' not found; the EAL probed: net_null0")


def test_no_port_at_all_is_named(log_dir):
    fails_with(log_dir, ["-l", "0-1"], [], "no port: the EAL found none")


def test_a_single_lcore_is_refused_with_the_reason(log_dir):
    fails_with(log_dir, ["--vdev=net_null0,no-rx=1", "-l", "0"], [], "no worker lcore")


# net_ring stands in for a NIC: like every port the runtime does not know to
# copy each frame, it is counted as keeping a buffer per descriptor.
RING_PORT = ["--vdev=net_ring0", "-l", "0-1"]


def test_a_pool_the_rings_would_drain_is_refused_with_the_sum(log_dir):
    # One worker on one port: 1024 receive and 1024 transmit descriptors,
    # a 384-buffer cache, two bursts of 32, then 256 to merge with.
    log = fails_with(log_dir, RING_PORT, ["--mbufs", "2048"], "--mbufs 2048 is too few")
    assert "leave 2496 buffers" in log and "give --mbufs 2752 or more" in log, log
    nic = start_nic(RING_PORT, ["--mbufs", "2752", "--grpc", "none"], None, log_dir)
    try:
        assert "each worker may hold 256 of each port's 2752 buffers" in nic.log(), nic.log()
    finally:
        nic.stop()


def test_a_port_that_copies_frames_keeps_none_of_the_pool(log_dir):
    """net_null, like net_af_packet and net_pcap, takes a buffer as a frame arrives and frees what it sends at once:
    only the cache and two bursts are out of the program's hands (448), the rest is for merging."""
    nic = start_nic(NULL_PORT, ["--mbufs", "1024", "--grpc", "none"], None, log_dir)
    try:
        assert "each worker may hold 576 of each port's 1024 buffers" in nic.log(), nic.log()
        # net_null sends no buffer chains: merged packets are flattened.
        assert "port net_null0 cannot send a packet in more than one buffer (no MULTI_SEGS)" in nic.log(), nic.log()
    finally:
        nic.stop()


def test_memif_keeps_none_of_the_pool_unless_a_zero_copy_client(log_dir):
    """net_memif copies every frame in and out of the shared memory, as net_null does: 576 of 1024 buffers are left
    to merge with (counted as a NIC, 1024 buffers were refused). A client in zero-copy mode keeps a buffer in each of
    its rings' 2^rsize slots, 2048 each way with rsize=11: the least --mbufs is then 2048 + 2048 + 448 + 256."""
    server = [f"--vdev=net_memif0,role=server,socket={log_dir / 'server.sock'}", "-l", "0-1"]
    nic = start_nic(server, ["--mbufs", "1024", "--grpc", "none"], None, log_dir)
    try:
        assert "each worker may hold 576 of each port's 1024 buffers" in nic.log(), nic.log()
    finally:
        nic.stop()
    # memif's zero-copy mode shares the process's memory with the peer, from one file per memory list.
    client = [f"--vdev=net_memif0,socket={log_dir / 'client.sock'},zero-copy=yes,rsize=11", "--single-file-segments", "-l", "0-1"]
    log = fails_with(log_dir, client, ["--mbufs", "4799"], "--mbufs 4799 is too few")
    assert "give --mbufs 4800 or more" in log, log


TWO_NULL_PORTS = ["--vdev=net_null0,no-rx=1", "--vdev=net_null1,no-rx=1", "-l", "0-1"]


def test_a_port_mtu_names_a_served_port(log_dir):
    two_ports = TWO_NULL_PORTS
    log = fails_with(log_dir, NULL_PORT, ["--port-mtu", "net_null7=1500"], "port 'net_null7' not found; the EAL probed: net_null0")
    assert "--port-mtu net_null7=1500: no such port" in log, log
    fails_with(
        log_dir, two_ports, ["--port", "net_null0", "--port-mtu", "net_null1=1500"], "--port-mtu net_null1=1500: net_null1 is not one of the served ports"
    )
    # The default counts only for a port that keeps it: here none does.
    fails_with(log_dir, NULL_PORT, ["--port-mtu", "net_null0=1500"], "must not exceed 1500, the largest MTU of the served ports")


def test_path_mtus_are_held_to_the_smallest_port(log_dir):
    """Split packets and probes leave by the Internet side, the port of its own smaller MTU."""
    fails_with(log_dir, TWO_NULL_PORTS, ["--port-mtu", "net_null1=1400"], "--default-path-mtu-v4 1500 and --default-path-mtu-v6 1280 must not exceed 1400")
    fails_with(
        log_dir,
        TWO_NULL_PORTS,
        ["--port-mtu", "net_null1=1400", "--default-path-mtu-v4", "1400", "--path-mtu", "198.51.100.0/24=1500"],
        "--path-mtu 198.51.100.0/24=1500 must not exceed 1400, the smallest MTU of the served ports",
    )
    fails_with(
        log_dir,
        TWO_NULL_PORTS,
        ["--port-mtu", "net_null1=1500", "--pmtu-discovery", "on", "--pmtu-probe-mtu", "9000"],
        "--pmtu-probe-mtu 9000 is larger than 1500, the smallest MTU of the served ports",
    )


def test_a_port_mtu_given_twice_in_a_config_file_is_refused(tmp_path):
    config = tmp_path / "nic.conf"
    # Spaces around the second '=' name the same port.
    config.write_text("port-mtu = net_null1=1500\nport-mtu = net_null1 = 1400\n")
    result = run_nic("--", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}:2: --port-mtu: port 'net_null1' is given twice" in result.stderr, result.stderr


def test_a_receive_port_has_one_return_port(log_dir):
    fails_with(
        log_dir,
        TWO_NULL_PORTS,
        ["--return-port", "net_null0=net_null1", "--return-port", "net_null0=net_null0"],
        "port 'net_null0' has two --return-port",
    )


def test_each_port_gets_its_own_mtu(log_dir):
    nic = start_nic(TWO_NULL_PORTS, ["--port-mtu", "net_null1=1500"], None, log_dir, grpc_address=f"127.0.0.1:{free_tcp_port()}")
    try:
        assert nic.telemetry("/ethdev/info,0")["mtu"] == 9000
        assert nic.telemetry("/ethdev/info,1")["mtu"] == 1500
        stub = nic.stub()
        # A path MTU above the Internet side's 1500 is refused; the internal MTU may use the rack side's 9000.
        with pytest.raises(grpc.RpcError) as refused:
            stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24"), mtu=1501), timeout=5)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "mtu 1501 for 192.0.2.0/24 is outside 576..1500" in refused.value.details()
        stub.SetPathMtu(nic_pb2.SetPathMtuRequest(prefix=common_pb2.Prefix(cidr="192.0.2.0/24"), mtu=1500), timeout=5)
        config = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
        config.internal_mtu = 9000
        assert stub.Configure(config, timeout=5).internal_mtu == 9000
    finally:
        nic.stop()


def test_an_af_xdp_pool_is_counted_with_the_buffers_its_rings_keep(log_dir):
    """net_af_xdp keeps 2048 of the pool for receiving, not one ring's 1024,
    and up to 2048 more of what it sent in its transmit and completion
    rings. Counted as one ring each, a pool of 4608 passed the budget on two
    ports (AF_XDP beside af_packet), and a TCP transfer through it stalled
    for good (test_nic_tcp.py runs at the least now allowed, 4800)."""
    if why := xdp_unavailable():
        pytest.skip(f"af_xdp: {why}")
    nic_ns = Netns("jgn")
    peer_ns = None
    try:
        peer_ns = Netns("jgp")
        veth(nic_ns, "jgxdp0", peer_ns, "jgxdp1", mtu_a=1500, mtu_b=1500)
        eal = ["--vdev=net_af_xdp0,iface=jgxdp0", "-l", "0-1"]
        nic = start_nic(eal, ["--mbufs", "4608", "--port-mtu", "1500", "--internal-mtu", "1500"], nic_ns, log_dir, wait_ready=False)
        try:
            nic.proc.wait(timeout=30)
        finally:
            nic.stop(signal.SIGKILL)
        # One port: 2048 kept for receiving, a 384-buffer cache, two bursts
        # of 32, 2048 kept by the transmit side; then 256 to merge with.
        assert nic.proc.returncode != 0 and "--mbufs 4608 is too few" in nic.log(), nic.log()
        assert "leave 4544 buffers" in nic.log() and "give --mbufs 4800 or more" in nic.log(), nic.log()
    finally:
        nic_ns.delete()
        if peer_ns:
            peer_ns.delete()


def test_grpc_address_in_use_is_named(log_dir):
    port = free_tcp_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        fails_with(log_dir, NULL_PORT, [], f"gRPC address 127.0.0.1:{port} is in use", grpc_address=f"127.0.0.1:{port}")


def test_config_file_sets_everything(log_dir, tmp_path):
    port = free_tcp_port()
    config = tmp_path / "nic.conf"
    config.write_text(
        "# jumbogate-nic for the test\n"
        f'eal = "--no-huge -m 384 --no-pci --file-prefix jgcfg{port} -l 0-1 --vdev=net_null0,no-rx=1"\n'
        f"grpc = 127.0.0.1:{port}\n"
        "internal-prefix = 10.10.0.0/16\n"
        "internal-mtu = 8000   # leaves room for a tunnel\n"
        "path-mtu = 198.51.100.0/24=1400\n"
        "merge-unknown-flows = off\n"
    )
    proc = subprocess.Popen([str(NIC_BINARY), "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        import grpc

        from jumbogate.v1 import nic_pb2_grpc

        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = nic_pb2_grpc.NicStub(channel)
        config_reply = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
        assert config_reply.internal_mtu == 8000 and not config_reply.merge_unknown_flows
        mtus = stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5)
        assert [(e.prefix.cidr, e.mtu) for e in mtus.entries] == [("198.51.100.0/24", 1400)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        remove_runtime_dir(f"jgcfg{port}")
    assert proc.returncode == 0


def test_config_file_mistakes_name_file_and_line(tmp_path):
    config = tmp_path / "bad.conf"
    config.write_text("internal-prefix = 10.10.0.0/16\ninternal-mtu = lots\n")
    result = run_nic("--config", str(config))
    assert result.returncode == 2
    assert f"{config}:2: --internal-mtu 'lots'" in result.stderr
    config.write_text("colour = blue\n")
    assert f"{config}:1: unknown key 'colour'" in run_nic("--config", str(config)).stderr


def test_a_config_line_longer_than_the_reader_takes_is_refused(tmp_path):
    """Not cut in two: the rest of a long comment would be read as a line of its own."""
    config = tmp_path / "long.conf"
    config.write_text("internal-prefix = 10.10.0.0/16\n# " + "x" * 1021 + "internal-mtu = 9216\n")
    result = run_nic("--", "--config", str(config))
    assert result.returncode == 2
    assert f"{config}:2: line longer than 1023 bytes" in result.stderr, result.stderr
    # 1023 bytes and the newline are one line; so is a last line without one.
    config.write_text("# " + "x" * 1021 + "\ncolour = blue")
    assert f"{config}:2: unknown key 'colour'" in run_nic("--", "--config", str(config)).stderr
    config.write_text("#\n# " + "x" * 1021)
    result = run_nic("--", "--config", str(config), "--bogus")
    assert "line longer" not in result.stderr and "unknown option '--bogus'" in result.stderr, result.stderr


def test_sigterm_flushes_everything_and_a_restart_starts_empty(log_dir):
    # Every flow counts as fast, so tails wait for partners (up to 1 ms)
    # and SIGTERM finds packets held.
    options = ["--internal-prefix", "10.10.0.0/16", "--delay-rate-threshold-gbps", "0", "--delay-max-us", "1000"]
    wiring = SinglePort(log_dir, options)
    try:
        stub = wiring.nic.stub()
        first_boot = stub.GetInfo(nic_pb2.GetInfoRequest(), timeout=5).boot_id
        flow = common_pb2.FiveTuple(src_ip="203.0.113.5", dst_ip="10.10.0.5", protocol=6, src_port=46000, dst_port=80)
        stub.OnloadFlow(nic_pb2.NicFlowRequest(flow=flow), timeout=5)
        stop = threading.Event()
        sent = [0]

        def stream():
            seq = 1000
            while not stop.is_set():
                frames = tcp_segments("203.0.113.5", "10.10.0.5", 46000, 80, count=3, size=1448, seq=seq)
                wiring.port.send(frames)
                sent[0] += len(frames)
                seq += 3 * 1448
                time.sleep(0.0005)

        sender = threading.Thread(target=stream)
        sender.start()
        time.sleep(1.0)
        assert wiring.nic.stop(signal.SIGTERM) == 0, wiring.nic.log()
        stop.set()
        sender.join(timeout=5)
        received = wiring.port.receive(quiet=0.5)
        totals = wiring.nic.exit_totals
        assert totals, wiring.nic.log()
        # The line names the signal that was sent (strsignal(SIGTERM)).
        assert "jumbogate-nic: Terminated: flushing held packets and stopping" in wiring.nic.log(), wiring.nic.log()
        assert totals["packets_held"] == 0 and totals["packets_dropped"] == 0, totals
        assert totals["packets_in"] + totals["packets_created"] == totals["packets_out"] + totals["packets_absorbed"]
        assert totals["merged_packets"] > 0
        assert len(received) == totals["packets_out"], (len(received), totals)

        wiring.nic = start_nic(
            [f"--vdev=net_af_packet0,iface={wiring.nic_if},blocksz=12288,framesz=12288,framecnt=1024,qpairs=1", "-l", "0-1"],
            ["--mbuf-size", "12288", "--mbufs", "4096", *options],
            wiring.nic_ns,
            log_dir,
        )
        stub = wiring.nic.stub()
        assert stub.GetInfo(nic_pb2.GetInfoRequest(), timeout=5).boot_id != first_boot
        assert list(stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5).flows) == []
        assert stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).packets_in == 0
    finally:
        wiring.close()


def test_sigint_stops_cleanly_and_says_so(log_dir):
    nic = start_nic(NULL_PORT, [], None, log_dir)
    assert nic.stop(signal.SIGINT) == 0, nic.log()
    assert "jumbogate-nic: Interrupt: flushing held packets and stopping" in nic.log(), nic.log()
    assert nic.exit_totals["packets_held"] == 0, nic.exit_totals


def test_health_and_reflection_are_served_beside_the_control_api(log_dir):
    """What grpcurl and a supervisor's health check ask: the server's health, and the services by reflection."""
    import grpc
    from google.protobuf import descriptor_pool
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    address = f"127.0.0.1:{free_tcp_port()}"
    nic = start_nic(NULL_PORT, ["--mbufs", "2752"], None, log_dir, grpc_address=address)
    try:
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            database = ProtoReflectionDescriptorDatabase(channel)
            assert {"jumbogate.v1.Nic", "grpc.health.v1.Health"} <= set(database.get_services())
            pool = descriptor_pool.DescriptorPool(database)
            assert {"GetStats", "Configure"} <= {m.name for m in pool.FindServiceByName("jumbogate.v1.Nic").methods}
    finally:
        nic.stop()
