"""The controller's Tofino path (switch.target: tofino), end to end against jumbogate-switch.

jumbogate-switch runs the v1model program, so the pipeline directory here
is bf-p4c's layout (bfrt.json, pipe/context.json, pipe/tofino.bin) around
the P4Info the switch serves; the compiler's files are stand-ins whose
bytes the test recognises. What is checked is the controller's side: the
blob it pushes is Stratum's BfPipelineConfig carrying exactly those files,
the ICMP signal's mirror sessions are written through the packet
replication engine and read back from the switch, and the epoch follows
the target. Where bf-p4c is present, the blob is also built from a real
compile of the TNA top level.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import finsy as fy
import pytest
from finsy.proto import p4r
from test_operator_tools import PORTS, Rig

from jumbogate import tofino
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]


def tofino_pipeline(directory, p4info) -> dict:
    """bf-p4c's output layout, with stand-in compiler files; returns what each holds."""
    (directory / "pipe").mkdir(parents=True)
    shutil.copy(p4info, directory / "jumbogate.p4info.txtpb")
    files = {
        "bfrt.json": b'{"schema_version": "1.0.0", "tables": []}',
        "pipe/context.json": b'{"program_name": "jumbogate"}',
        "pipe/tofino.bin": bytes(range(256)) * 64,
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controller-tofino")
    rig = Rig(tmp)
    rig.files = tofino_pipeline(tmp / "tofino", lab.PIPELINE_512 / "jumbogate.p4info.txtpb")
    rig.config["switch"].update(target="tofino", pipeline=str(tmp / "tofino"))
    rig.write_config(rig.config)
    try:
        rig.start()
        lab.wait_until(lambda: rig.json("stats")["switch_connected"], "the controller to program the switch", 60)
        yield rig
    finally:
        rig.stop()


def read_switch(address: str):
    """The pipeline config and the clone sessions the switch holds, read by an independent client."""

    async def go():
        options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1)
        async with fy.Switch("tofino-reader", address, options) as reader:
            reply = await reader._p4client.request(
                p4r.GetForwardingPipelineConfigRequest(device_id=1, response_type=p4r.GetForwardingPipelineConfigRequest.ALL)
            )
            sessions = [entry async for entry in reader.read(fy.P4CloneSessionEntry())]
            return reply.config.p4_device_config, sessions

    return asyncio.run(go())


def test_the_blob_is_stratums_bf_pipeline_config_of_the_compilers_files(rig):
    blob, _ = read_switch(rig.switch.grpc_address)
    config = tofino.BfPipelineConfig.FromString(blob)
    assert config.p4_name == "jumbogate" and config.bfruntime_info == rig.files["bfrt.json"]
    assert len(config.profiles) == 1
    profile = config.profiles[0]
    assert (profile.profile_name, profile.context, profile.binary, list(profile.pipe_scope)) == (
        "pipe",
        rig.files["pipe/context.json"],
        rig.files["pipe/tofino.bin"],
        [],
    )


def replica(r) -> tuple[int, int]:
    """finsy's replica, whichever form it decodes to: a port, (port, instance), or a P4Replica."""
    if isinstance(r, int):
        return (r, 0)
    if isinstance(r, tuple):
        return tuple(r)
    return (r.egress_port, r.instance)


def test_each_port_with_a_role_has_its_signal_mirror_session_truncated(rig):
    _, sessions = read_switch(rig.switch.grpc_address)
    held = {s.session_id: ([replica(r) for r in s.replicas], s.packet_length_bytes) for s in sessions}
    # Every port that carries traffic; the CPU port (its role is not written to the switch) needs none.
    expected = {512 | p["port"]: ([(p["port"], 0)], tofino.SIGNAL_TRUNCATE_BYTES) for p in PORTS if p["role"] != "cpu"}
    assert held == expected
    assert tofino.SIGNAL_TRUNCATE_BYTES == 4 + 14 + 72  # mirror header, Ethernet, the quote (p4src/tna/signal.p4)


def test_a_resync_finds_the_sessions_as_written_and_writes_nothing(rig):
    """The sessions read back equal what the controller wants: its periodic reconcile (every 5 s) changes nothing."""
    before = rig.json("stats")["reconcile"]
    lab.wait_until(lambda: int(rig.json("stats")["reconcile"]["runs"]) >= int(before["runs"]) + 2, "two more reconcile runs", 30)
    after = rig.json("stats")["reconcile"]
    assert [int(after.get(k, 0)) for k in ("inserted", "modified", "deleted")] == [int(before.get(k, 0)) for k in ("inserted", "modified", "deleted")]


def test_the_sketch_epoch_follows_the_target(tmp_path):
    base = "switch:\n  target: {target}\n  ports: [{{port: 1, role: external}}]\nelephant:\n  epoch_ms: {epoch}\n"
    for target, epoch, ok in (("tofino", 1074, True), ("tofino2", 1074, True), ("tofino", 1049, False), ("v1model", 1049, True), ("v1model", 1074, False)):
        path = tmp_path / f"{target}-{epoch}.yaml"
        path.write_text(base.format(target=target, epoch=epoch))
        done = subprocess.run([rig_ctl(), "config", "validate", str(path)], capture_output=True, text=True, timeout=30)
        assert ("elephant.epoch_ms" not in done.stdout + done.stderr) == ok, (target, epoch, done.stdout, done.stderr)
    path = tmp_path / "unknown.yaml"
    path.write_text(base.format(target="asic", epoch=1049))
    done = subprocess.run([rig_ctl(), "config", "validate", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "switch.target" in done.stdout + done.stderr, done


def rig_ctl():
    return lab.REPO / ".venv" / "bin" / "jumbogatectl"


def test_the_session_numbers_follow_the_chip():
    assert [tofino.signal_session(p, "tofino") for p in (0, 5, 300)] == [512, 517, 812]
    assert [tofino.signal_session(p, "tofino2") for p in (5, 300)] == [5, 44]


@pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not on PATH: the blob is not built from a real Tofino compile")
def test_the_blob_built_from_a_real_bf_p4c_compile(tmp_path):
    out = tmp_path / "tofino-depth256"
    subprocess.run(["bash", str(lab.REPO / "p4src" / "compile-tofino.sh"), "tofino", "256", str(out)], check=True, timeout=3600)
    config = tofino.BfPipelineConfig.FromString(tofino.device_config(out, "tofino"))
    assert config.profiles[0].binary == (out / "pipe" / "tofino.bin").read_bytes()
    assert config.profiles[0].context == (out / "pipe" / "context.json").read_bytes()
    assert config.bfruntime_info == (out / "bfrt.json").read_bytes()


def test_make_p4_tofinos_pack_writes_the_blob_the_controller_pushes(tmp_path):
    """`python -m jumbogate.tofino pack` (run by make p4-tofino after each compile) writes the same bytes the
    controller builds; a directory that is not bf-p4c's output is refused by name."""
    files = tofino_pipeline(tmp_path / "tofino2", lab.PIPELINE_512 / "jumbogate.p4info.txtpb")
    (tmp_path / "tofino2" / "pipe" / "tofino.bin").rename(tmp_path / "tofino2" / "pipe" / "tofino2.bin")
    python = str(lab.REPO / ".venv" / "bin" / "python")
    done = subprocess.run([python, "-m", "jumbogate.tofino", "pack", str(tmp_path / "tofino2"), "tofino2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "tofino2" / tofino.PIPELINE_CONFIG_FILE).read_bytes()
    assert written == tofino.device_config(tmp_path / "tofino2", "tofino2")
    config = tofino.BfPipelineConfig.FromString(written)
    assert (config.p4_name, config.bfruntime_info, config.profiles[0].binary) == ("jumbogate", files["bfrt.json"], files["pipe/tofino.bin"])
    refused = subprocess.run([python, "-m", "jumbogate.tofino", "pack", str(tmp_path / "tofino2"), "tofino"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "lacks pipe/tofino.bin" in refused.stderr, refused.stderr
