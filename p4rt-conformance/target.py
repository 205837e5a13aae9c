"""The target under test and a P4Runtime client written on p4lang's own `p4runtime` bindings.

Nothing here comes from jumbogate's client code: the messages are built with the
p4.v1 stubs of PyPI's `p4runtime` package, as any third-party controller would.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testlab import lab

REPO = Path(__file__).resolve().parents[1]
# The test lab's, as for every other suite (JUMBOGATE_SWITCH overrides it).
SWITCH = lab.SOFT_SWITCH
DEVICE_ID = 1
CPU_PORT = 510  # jumbogate-switch's default --cpu-port

# google.rpc.Code values, as the specification names them.
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = 0, 1, 2, 3, 4, 5
ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = 6, 7, 8, 9
OUT_OF_RANGE, UNIMPLEMENTED = 11, 12


def load_p4info(depth: int = 512) -> p4info_pb2.P4Info:
    text = (REPO / "p4src" / "compiled" / f"depth{depth}" / "jumbogate.p4info.txtpb").read_text()
    return text_format.Parse(text, p4info_pb2.P4Info())


def bmv2_missing() -> str | None:
    """Why the BMv2 column of the suite cannot be measured on this machine, or None. BMv2 runs the committed
    compile (p4src/compiled/), so p4c is not needed."""
    if shutil.which("simple_switch_grpc") is None:
        return "BMv2 not measured: simple_switch_grpc is not on PATH (README, 'Getting p4c and BMv2')"
    return None


class Veth:
    """A veth pair in the root namespace: the switch takes one end, the test sends and receives on the other."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.switch_end, self.peer = f"jgcs{tag}", f"jgcp{tag}"
        subprocess.run(["ip", "link", "add", self.switch_end, "type", "veth", "peer", "name", self.peer], check=True)
        for name in (self.switch_end, self.peer):
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((self.peer, 0))

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def receive(self, match, timeout: float = 5) -> bytes | None:
        """The first frame on the peer for which match(frame) holds, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                frame = self.sock.recv(65536)
            except TimeoutError:
                return None
            if match(frame):
                return frame
        return None

    def close(self) -> None:
        self.sock.close()
        subprocess.run(["ip", "link", "del", self.switch_end], check=False, stderr=subprocess.DEVNULL)


class Switch:
    """jumbogate-switch with P4 port 0 on a veth, serving P4Runtime on a unix socket."""

    # jumbogate-switch runs the program it was built with: the device config is an empty JSON object.
    device_config = b"{}"

    def __init__(self, options: list[str] = ()):
        if not SWITCH.exists():
            raise FileNotFoundError(f"{SWITCH} is not built; run 'make setup'")
        self.dir = Path(tempfile.mkdtemp(prefix="p4rt-conformance-"))
        self.veth = Veth()
        self.prefix = f"jgc{uuid.uuid4().hex[:8]}"
        self.address = f"unix:{self.dir / 'p4rt.sock'}"
        self.log_path = self.dir / "switch.log"
        cpus = max(1, (os.cpu_count() or 2) - 1)
        command = [str(SWITCH), "--no-huge", "-m", "512", "--no-pci", "--file-prefix", self.prefix, "--lcores", f"0@0,1@{1 % (cpus + 1) or 1}", "--"]
        command += ["--port", f"0@{self.veth.switch_end}", "--grpc", self.address, *options]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "jumbogate-switch ready: " not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"jumbogate-switch did not start:\n{self.log_path.read_text(errors='replace')}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.veth.close()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Bmv2:
    """BMv2's simple_switch_grpc with P4 port 0 on a veth and the same CPU port, no program until a client pushes
    the committed BMv2 JSON (its device config)."""

    device_config = (REPO / "p4src" / "compiled" / "depth512" / "jumbogate.json").read_bytes()

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="p4rt-conformance-bmv2-"))
        self.veth = Veth()
        self.switch = lab.Bmv2(ports={0: self.veth.switch_end}, log=self.dir / "bmv2.log", cpu_port=CPU_PORT, device_id=DEVICE_ID)
        try:
            self.switch.start()
        except Exception:
            self.veth.close()
            raise
        self.address = self.switch.grpc_address

    def close(self) -> None:
        self.switch.stop()
        self.veth.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# P4Runtime 1.4's role names, which p4runtime 1.3.0's bindings lack: Role.name, and the role of a WriteRequest
# and of a SetForwardingPipelineConfigRequest.
ROLE_NAME, REQUEST_ROLE = 3, 6


def _varint(n: int) -> bytes:
    out = b""
    while n > 0x7F:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def with_string_field(message, number: int, value: str):
    """`message` with string field `number` set to `value` (unset when empty), encoded by hand: the bindings carry
    it as a field they do not know, and send it as they received it."""
    if not value:
        return message
    raw = value.encode()
    out = type(message)()
    out.ParseFromString(message.SerializeToString() + _varint(number << 3 | 2) + _varint(len(raw)) + raw)
    return out


class Controller:
    """One P4Runtime client: a channel, one StreamChannel, one election id; a role (its name, and the config its
    arbitration carries as an Any) when `role` is set."""

    def __init__(
        self,
        address: str,
        election: tuple[int, int] | None,
        device_id: int = DEVICE_ID,
        role: str = "",
        role_config=None,
        device_config: bytes = Switch.device_config,
    ):
        self.role = role
        self.device_config = device_config
        self.role_config = role_config
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.election = election
        self._out: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self._out.get, None))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for message in self.stream:
                self.inbox.put(message)
        except grpc.RpcError as e:
            self.inbox.put(e)

    def election_id(self) -> p4runtime_pb2.Uint128:
        high, low = self.election or (0, 0)
        return p4runtime_pb2.Uint128(high=high, low=low)

    def send(self, message: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(message)

    def arbitrate(self, election: tuple[int, int] | None = None, device_id: int | None = None) -> p4runtime_pb2.MasterArbitrationUpdate:
        if election is not None:
            self.election = election
        update = p4runtime_pb2.MasterArbitrationUpdate(device_id=self.device_id if device_id is None else device_id)
        if self.election is not None:
            update.election_id.CopyFrom(self.election_id())
        if self.role or self.role_config is not None:
            role = p4runtime_pb2.Role()
            if self.role_config is not None:
                role.config.CopyFrom(self.role_config)
            update.role.CopyFrom(with_string_field(role, ROLE_NAME, self.role))
        self.send(p4runtime_pb2.StreamMessageRequest(arbitration=update))
        return self.next("arbitration")

    def next(self, kind: str, timeout: float = 5):
        """The next stream message of `kind` (arbitration, packet, digest, error, idle_timeout_notification);
        raises the stream's gRPC error if it ended."""
        deadline = time.monotonic() + timeout
        while True:
            item = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(item, grpc.RpcError):
                raise item
            if item.WhichOneof("update") == kind:
                return getattr(item, kind)

    def set_pipeline(self, p4info: p4info_pb2.P4Info, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, cookie: int | None = None):
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        if self.election is not None:
            request.election_id.CopyFrom(self.election_id())
        if p4info is not None:
            request.config.p4info.CopyFrom(p4info)
            request.config.p4_device_config = self.device_config
            if cookie is not None:
                request.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(with_string_field(request, REQUEST_ROLE, self.role), timeout=10)

    def write(self, updates: list[p4runtime_pb2.Update], election: bool = True) -> list[int]:
        """One WriteRequest; the canonical code of each update, read from the status details."""
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id, updates=updates)
        if election and self.election is not None:
            request.election_id.CopyFrom(self.election_id())
        request = with_string_field(request, REQUEST_ROLE, self.role)
        try:
            self.stub.Write(request, timeout=10)
        except grpc.RpcError as e:
            for key, value in e.trailing_metadata() or ():
                if key == "grpc-status-details-bin":
                    status = status_pb2.Status.FromString(value)
                    codes = []
                    for detail in status.details:
                        error = p4runtime_pb2.Error()
                        assert detail.Unpack(error), detail.type_url
                        codes.append(error.canonical_code)
                    assert len(codes) == len(updates)
                    return codes
            return [e.code().value[0]] * len(updates)
        return [OK] * len(updates)

    def read(self, entities: list[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=entities)
        return [e for reply in self.stub.Read(request, timeout=10) for e in reply.entities]

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


class Program:
    """Ids and entities of the jumbogate P4 program, by the names in its P4Info."""

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables = {t.preamble.alias: t for t in p4info.tables}
        self.actions = {a.preamble.alias: a for a in p4info.actions}
        self.profile = next(p for p in p4info.action_profiles if p.preamble.alias == "ecmp_selector")
        self.digest = next(d for d in p4info.digests if d.preamble.alias == "elephant_digest_t")

    def field(self, table: str, name: str) -> int:
        return next(f.id for f in self.tables[table].match_fields if f.name == name)

    def action(self, name: str, **params: bytes) -> p4runtime_pb2.Action:
        info = self.actions[name]
        action = p4runtime_pb2.Action(action_id=info.preamble.id)
        for p in info.params:
            action.params.add(param_id=p.id, value=params[p.name])
        return action

    def exact(self, table: str, name: str, value: bytes) -> p4runtime_pb2.FieldMatch:
        return p4runtime_pb2.FieldMatch(field_id=self.field(table, name), exact=p4runtime_pb2.FieldMatch.Exact(value=value))

    def entry(self, table: str, matches, action: p4runtime_pb2.Action | None = None, **fields) -> p4runtime_pb2.Entity:
        entry = p4runtime_pb2.TableEntry(table_id=self.tables[table].preamble.id, match=matches, **fields)
        if action is not None:
            entry.action.action.CopyFrom(action)
        return p4runtime_pb2.Entity(table_entry=entry)

    def port_role(self, port: int, role: int = 1) -> p4runtime_pb2.Entity:
        return self.entry("port_roles", [self.exact("port_roles", "ingress_port", port.to_bytes(2, "big"))], self.action("set_port_role", role=bytes([role])))

    def default(self, table: str, action: p4runtime_pb2.Action) -> p4runtime_pb2.Entity:
        return self.entry(table, [], action, is_default_action=True)

    def route_to(self, port: int, src_mac: bytes, dst_mac: bytes) -> list[p4runtime_pb2.Update]:
        """Port 0 external, 10.9.0.0/16 out of `port` through one next hop."""
        member = p4runtime_pb2.ActionProfileMember(
            action_profile_id=self.profile.preamble.id,
            member_id=1,
            action=self.action("set_next_hop", port=port.to_bytes(2, "big"), src_mac=src_mac, dst_mac=dst_mac),
        )
        hops = self.entry("next_hops", [self.exact("next_hops", "group_id", b"\x01")])
        hops.table_entry.action.action_profile_member_id = 1
        route = self.entry(
            "routes_v4",
            [
                p4runtime_pb2.FieldMatch(
                    field_id=self.field("routes_v4", "dst_addr"), lpm=p4runtime_pb2.FieldMatch.LPM(value=bytes([10, 9, 0, 0]), prefix_len=16)
                )
            ],
            self.action("set_next_hop_group", group_id=b"\x00\x01"),
        )
        return [insert(self.port_role(0)), insert(p4runtime_pb2.Entity(action_profile_member=member)), insert(hops), insert(route)]


def insert(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=entity)


def modify(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=entity)


def delete(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE, entity=entity)


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_frame(
    src: str, dst: str, protocol: int, l4: bytes, ttl: int = 64, src_mac: bytes = b"\x02\0\0\0\0\x01", dst_mac: bytes = b"\x02\0\0\0\0\x02"
) -> bytes:
    header = bytearray(20)
    header[0], header[8], header[9] = 0x45, ttl, protocol
    header[2:4] = (20 + len(l4)).to_bytes(2, "big")
    header[12:16], header[16:20] = socket.inet_aton(src), socket.inet_aton(dst)
    header[10:12] = checksum(bytes(header)).to_bytes(2, "big")
    return dst_mac + src_mac + b"\x08\x00" + bytes(header) + l4


def udp_frame(payload: bytes, src: str = "198.51.100.7", dst: str = "10.9.0.1", sport: int = 4000, dport: int = 5000) -> bytes:
    udp = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + (8 + len(payload)).to_bytes(2, "big") + b"\0\0" + payload
    return ipv4_frame(src, dst, 17, udp)


def tcp_frame(sport: int, dport: int = 443, payload: bytes = bytes(60), src: str = "198.51.100.7", dst: str = "10.9.0.1") -> bytes:
    tcp = bytearray(20)
    tcp[0:2], tcp[2:4] = sport.to_bytes(2, "big"), dport.to_bytes(2, "big")
    tcp[12], tcp[13] = 5 << 4, 0x18  # PSH, ACK
    tcp[14:16] = (65535).to_bytes(2, "big")
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + b"\0\x06" + (20 + len(payload)).to_bytes(2, "big")
    tcp[16:18] = checksum(pseudo + bytes(tcp) + payload).to_bytes(2, "big")
    return ipv4_frame(src, dst, 6, bytes(tcp) + payload)
