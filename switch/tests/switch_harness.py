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
