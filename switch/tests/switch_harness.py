"""Running the real jumbogate-switch on veths, and a bare P4Runtime client.

The client speaks P4Runtime with the stubs finsy ships, message by message,
so that tests can send what a well-behaved library never would (wrong
widths, unknown ids, a second primary) and see the switch's exact answer.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import text_format

from testlab import lab
from testlab.nic_harness import REPO, Netns, lcores, remove_runtime_dir, unique, veth

SWITCH_BINARY = lab.SOFT_SWITCH
COMPILED = REPO / "p4src" / "compiled"
DEVICE_ID = 1


def p4info(depth: int = 512) -> p4i.P4Info:
    return text_format.Parse((COMPILED / f"depth{depth}" / "jumbogate.p4info.txtpb").read_text(), p4i.P4Info())


@dataclass
class SwitchProcess:
    proc: subprocess.Popen
    file_prefix: str
    grpc_address: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        remove_runtime_dir(self.file_prefix)
        return self.proc.returncode


def start_switch(ports: list[str], netns: Netns | None, log_dir: Path, options: list[str] = (), timeout: float = 30) -> SwitchProcess:
    """Start jumbogate-switch with `--port` values like '0@veth0'; return once it serves."""
    if not SWITCH_BINARY.exists():
        raise FileNotFoundError(f"{SWITCH_BINARY} is missing; run 'make setup'")
    prefix = unique("jgsw")
    address = f"unix:{log_dir / (prefix + '.sock')}"
    log_path = log_dir / f"{prefix}.log"
    command = [str(SWITCH_BINARY), "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix, "--lcores", lcores(1), "--"]
    for port in ports:
        command += ["--port", port]
    command += ["--grpc", address, *options]
    if netns is not None:
        command = ["ip", "netns", "exec", netns.name, *command]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir)
    switch = SwitchProcess(proc, prefix, address, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if re.search(r"^jumbogate-switch ready: ", switch.log(), re.M):
            return switch
        if proc.poll() is not None:
            raise RuntimeError(f"jumbogate-switch exited with {proc.returncode}:\n{switch.log()}")
        time.sleep(0.05)
    switch.stop(signal.SIGKILL)
    raise TimeoutError(f"jumbogate-switch not ready within {timeout}s:\n{switch.log()}")


class OnePortSwitch:
    """jumbogate-switch with P4 port 0 on a veth whose peer is `self.peer`."""

    def __init__(self, log_dir: Path, options: list[str] = ()):
        self.ns = Netns("jgsw")
        self.switch_if = unique("jgw")
        self.peer = unique("jgp")
        self.switch = None
        try:
            veth(self.ns, self.switch_if, self.ns, self.peer)
            self.switch = start_switch([f"0@{self.switch_if}"], self.ns, log_dir, list(options))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.switch:
            self.switch.stop()
        self.ns.delete()


class Client:
    """A P4Runtime client: one stream, one election id."""

    def __init__(self, address: str, election_low: int | None, device_id: int = DEVICE_ID, role: str = "", options: list | None = None, election_high: int = 0):
        self.channel = grpc.insecure_channel(address, options=options)
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.role = role
        self.election_low = election_low
        self.election_high = election_high
        self._requests: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        self._reading = threading.Event()
        self._reading.set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stream_status: grpc.RpcError | None = None

    def stop_reading(self) -> None:
        """From now on the stream's messages are not read (a client that hung): they pile up in the transport."""
        self._reading.clear()

    def resume_reading(self) -> None:
        """The stream's messages are read again, those that piled up first."""
        self._reading.set()

    def _read(self) -> None:
        try:
            for response in self._stream:
                self.responses.put(response)
                self._reading.wait()
        except grpc.RpcError as e:
            self.stream_status = e
            self.responses.put(e)

    def send(self, request: p4r.StreamMessageRequest) -> None:
        self._requests.put(request)

    def arbitrate(self, election_low: int | None = None, timeout: float = 5) -> p4r.MasterArbitrationUpdate:
        """Send an arbitration update; return the switch's answer to it."""
        if election_low is not None:
            self.election_low = election_low
        update = p4r.MasterArbitrationUpdate(device_id=self.device_id)
        update.role.name = self.role
        if self.election_low is not None:
            update.election_id.high = self.election_high
            update.election_id.low = self.election_low
        self.send(p4r.StreamMessageRequest(arbitration=update))
        return self.next_arbitration(timeout)

    def next_response(self, timeout: float = 5):
        item = self.responses.get(timeout=timeout)
        if isinstance(item, grpc.RpcError):
            raise item
        return item

    def next_arbitration(self, timeout: float = 5) -> p4r.MasterArbitrationUpdate:
        deadline = time.monotonic() + timeout
        while True:
            response = self.next_response(timeout=max(0.01, deadline - time.monotonic()))
            if response.HasField("arbitration"):
                return response.arbitration

    def election(self) -> p4r.Uint128:
        return p4r.Uint128(high=self.election_high, low=self.election_low or 0)

    def set_pipeline(self, info: p4i.P4Info, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, blob: bytes = b"{}"):
        request = p4r.SetForwardingPipelineConfigRequest(device_id=self.device_id, role=self.role, action=action)
        request.election_id.CopyFrom(self.election())
        request.config.p4info.CopyFrom(info)
        request.config.p4_device_config = blob
        return self.stub.SetForwardingPipelineConfig(request, timeout=10)

    def write(self, updates: list[p4r.Update], timeout: float = 10) -> list[int]:
        """Send one WriteRequest; the canonical code of every update (0: OK)."""
        request = p4r.WriteRequest(device_id=self.device_id, role=self.role, updates=updates)
        request.election_id.CopyFrom(self.election())
        try:
            self.stub.Write(request, timeout=timeout)
        except grpc.RpcError as e:
            return write_error_codes(e, len(updates))
        return [0] * len(updates)

    def read(self, entities: list[p4r.Entity]) -> list[p4r.Entity]:
        request = p4r.ReadRequest(device_id=self.device_id, entities=entities)
        out = []
        for reply in self.stub.Read(request, timeout=10):
            out.extend(reply.entities)
        return out

    def close(self) -> None:
        """End the stream and wait for the switch to end it too: the switch lets go of this client's election id
        before it answers the stream's end, so a client that arbitrates next with the same id is not refused as a
        second holder of it (as it was when the next test's primary came before the switch saw this one leave)."""
        self._requests.put(None)
        self._reading.set()
        self._reader.join(timeout=10)
        self.channel.close()


def write_error_codes(error: grpc.RpcError, count: int) -> list[int]:
    """The per-update codes of a failed Write (P4Runtime 12.3), or the RPC's own code for every update."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            codes = []
            for detail in status.details:
                item = p4r.Error()
                detail.Unpack(item)
                codes.append(item.canonical_code)
            assert len(codes) == count, f"{len(codes)} error details for {count} updates"
            return codes
    return [error.code().value[0]] * count


# ---- entities by the P4Info's aliases, and the frames the tests route -----

OK, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED = 0, 3, 5, 6, 7
RESOURCE_EXHAUSTED, FAILED_PRECONDITION, OUT_OF_RANGE = 8, 9, 11
INFO = p4info(512)


def table(alias: str):
    return next(t for t in INFO.tables if t.preamble.alias == alias)


def action_id(alias: str) -> int:
    return next(a.preamble.id for a in INFO.actions if a.preamble.alias == alias)


def field_id(table_alias: str, name: str) -> int:
    return next(f.id for f in table(table_alias).match_fields if f.name == name)


def entry(table_alias: str, matches: list[p4r.FieldMatch], action: str | None = None, params: dict[str, bytes] | None = None, priority: int = 0) -> p4r.Entity:
    t = table(table_alias)
    e = p4r.TableEntry(table_id=t.preamble.id, match=matches, priority=priority)
    if action is not None:
        info = next(a for a in INFO.actions if a.preamble.alias == action)
        e.action.action.action_id = info.preamble.id
        for p in info.params:
            e.action.action.params.add(param_id=p.id, value=(params or {})[p.name])
    return p4r.Entity(table_entry=e)


def exact(table_alias: str, name: str, value: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id(table_alias, name), exact=p4r.FieldMatch.Exact(value=value))


def lpm(table_alias: str, value: bytes, prefix_len: int) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=field_id(table_alias, "dst_addr"), lpm=p4r.FieldMatch.LPM(value=value, prefix_len=prefix_len))


def update(kind, entity: p4r.Entity) -> p4r.Update:
    return p4r.Update(type=kind, entity=entity)


def port_role(port: int, role: int) -> p4r.Entity:
    return entry("port_roles", [exact("port_roles", "ingress_port", port.to_bytes(2, "big"))], "set_port_role", {"role": bytes([role])})


def route_v4(prefix: bytes, length: int, group: int = 1) -> p4r.Entity:
    return entry("routes_v4", [lpm("routes_v4", prefix, length)], "set_next_hop_group", {"group_id": group.to_bytes(2, "big")})


ECMP_SELECTOR = next(p.preamble.id for p in INFO.action_profiles if p.preamble.alias == "ecmp_selector")
CPU_PORT = 510  # jumbogate-switch's default --cpu-port


def next_hop_member(member_id: int, port: int, src_mac: bytes = bytes(6), dst_mac: bytes = bytes(6)) -> p4r.Entity:
    action = entry("next_hops", [], "set_next_hop", {"port": port.to_bytes(2, "big"), "src_mac": src_mac, "dst_mac": dst_mac}).table_entry.action.action
    return p4r.Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=ECMP_SELECTOR, member_id=member_id, action=action))


def ecmp_group(group_id: int, weights: dict[int, int]) -> p4r.Entity:
    group = p4r.ActionProfileGroup(action_profile_id=ECMP_SELECTOR, group_id=group_id)
    for member_id, weight in weights.items():
        group.members.add(member_id=member_id, weight=weight)
    return p4r.Entity(action_profile_group=group)


def next_hops_entry(group: int, member_id: int | None = None, group_id: int | None = None) -> p4r.Entity:
    e = entry("next_hops", [exact("next_hops", "group_id", group.to_bytes(2, "big"))])
    if member_id is not None:
        e.table_entry.action.action_profile_member_id = member_id
    else:
        e.table_entry.action.action_profile_group_id = group_id
    return e


def all_table_entries(client: Client) -> list[p4r.TableEntry]:
    return [e.table_entry for e in client.read([p4r.Entity(table_entry=p4r.TableEntry())])]


def merge_flow_entry(n: int, idle_timeout_ns: int) -> p4r.Entity:
    matches = [
        exact("merge_flows", "ip_version", b"\x04"),
        exact("merge_flows", "src_addr", (0xC6120000 + n).to_bytes(4, "big")),
        exact("merge_flows", "dst_addr", bytes([10, 10, 0, 10])),
        exact("merge_flows", "protocol", b"\x06"),
        exact("merge_flows", "src_port", (1024 + n % 60000).to_bytes(2, "big")),
        exact("merge_flows", "dst_port", b"\x01\xbb"),
    ]
    e = entry("merge_flows", matches, "steer_merge_flow", {})
    e.table_entry.idle_timeout_ns = idle_timeout_ns
    return e


def udp_frame(size: int, ttl: int = 64) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="198.51.100.7", dst="10.9.0.1", ttl=ttl) / UDP(sport=4000, dport=5000)
    return bytes(head / bytes((i * 7 + 3) % 256 for i in range(size - len(head))))


def route_to(client: Client, port: int) -> None:
    """Port 0 external, 10.9.0.0/16 routed to `port` by a next hop that keeps the frame's MACs."""
    frame = udp_frame(64)
    codes = client.write(
        [
            update(p4r.Update.INSERT, port_role(0, 1)),
            update(p4r.Update.INSERT, next_hop_member(1, port, src_mac=frame[6:12], dst_mac=frame[0:6])),
            update(p4r.Update.INSERT, next_hops_entry(1, member_id=1)),
            update(p4r.Update.INSERT, route_v4(bytes([10, 9, 0, 0]), 16, group=1)),
        ]
    )
    assert codes == [OK] * 4


def forwarded(frame: bytes) -> bytes:
    """The frame as routing leaves it: the TTL one less, the IPv4 checksum again."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    packet = Ether(frame)
    packet[IP].ttl -= 1
    del packet[IP].chksum
    return bytes(packet)


def digest_config(max_timeout_ns: int, max_list_size: int, ack_timeout_ns: int = 0) -> p4r.Entity:
    config = p4r.DigestEntry.Config(max_timeout_ns=max_timeout_ns, max_list_size=max_list_size, ack_timeout_ns=ack_timeout_ns)
    return p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=INFO.digests[0].preamble.id, config=config))
