"""A Write that runs out of memory while the hop sets of next_hops are rebuilt (build_hop_sets, which builds them
with the data path's lock let go): the update is RESOURCE_EXHAUSTED, the data path keeps the sets it had, and the
switch goes on forwarding and writing.

The shortage is made by tests/newfail_shim.cc, loaded into the switch with LD_PRELOAD: operator new of a range of
sizes throws std::bad_alloc while a file exists. A group of 513 to 1,024 hops grows its list (14-byte hops) to
1,024 of them, 14,336 bytes, which nothing else a small Write does asks for. The std::bad_alloc used to leave the
lock let go and the Write let it go again: the workers' read lock spun for ever, forwarding stopped, and the next
Write hung.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from finsy.proto import p4r
from switch_harness import (
    ECMP_SELECTOR,
    INFO,
    OK,
    RESOURCE_EXHAUSTED,
    SWITCH_BINARY,
    Client,
    OnePortSwitch,
    ecmp_group,
    forwarded,
    next_hop_member,
    next_hops_entry,
    port_role,
    route_v4,
    udp_frame,
    update,
)

from testlab.nic_harness import PacketPort

SHIM_SOURCE = Path(__file__).parent / "newfail_shim.cc"
# meson builds the shim beside the switch (switch/meson.build).
SHIM_BUILT = SWITCH_BINARY.parent / "jumbogate-newfail.so"
HOPS_BYTES = 1024 * 14  # a list of 1,024 struct sw_next_hop
NEW_DST = bytes.fromhex("020000000099")


def shim(tmp_path) -> str:
    """The shim meson built, else one compiled now (a switch built or installed elsewhere)."""
    if SHIM_BUILT.exists():
        return str(SHIM_BUILT)
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip(f"no {SHIM_BUILT} and no c++ to compile {SHIM_SOURCE.name}: the allocation failure is not injected")
    out = tmp_path / "jumbogate-newfail.so"
    subprocess.run([compiler, "-std=c++17", "-O2", "-shared", "-fPIC", str(SHIM_SOURCE), "-o", str(out)], check=True)
    return str(out)


@pytest.fixture
def failing(tmp_path, monkeypatch):
    """The switch with the shim, and the file whose presence makes operator new of HOPS_BYTES throw."""
    trigger = tmp_path / "fail"
    with monkeypatch.context() as env:
        env.setenv("LD_PRELOAD", shim(tmp_path))
        env.setenv("JG_NEWFAIL_TRIGGER", str(trigger))
        env.setenv("JG_NEWFAIL_MIN", str(HOPS_BYTES))
        env.setenv("JG_NEWFAIL_MAX", str(HOPS_BYTES))
        wiring = OnePortSwitch(tmp_path)
    yield wiring, trigger
    trigger.unlink(missing_ok=True)
    wiring.close()


def received(wiring: OnePortSwitch, frame: bytes) -> list[bytes]:
    port = PacketPort(wiring.ns, wiring.peer)
    try:
        port.drain()
        port.send([frame])
        return port.receive(count=1, timeout=2)
    finally:
        port.close()


def test_a_write_out_of_memory_for_the_hop_sets_changes_nothing_and_the_switch_goes_on(failing):
    wiring, trigger = failing
    client = Client(wiring.switch.grpc_address, election_low=100)
    try:
        assert client.arbitrate().status.code == OK
        client.set_pipeline(INFO)
        frame = udp_frame(64)
        keep = {"src_mac": frame[6:12], "dst_mac": frame[0:6]}
        # 10.9.0.0/16 to group 3: four members of weight 256 (1,024 hops), each keeping the frame's MACs.
        members = [update(p4r.Update.INSERT, next_hop_member(m, 0, **keep)) for m in (2, 3, 4, 5)]
        others = [update(p4r.Update.INSERT, next_hop_member(m, 0, src_mac=frame[6:12], dst_mac=NEW_DST)) for m in (6, 7, 8, 9)]
        assert client.write([update(p4r.Update.INSERT, port_role(0, 1)), *members, *others]) == [OK] * 9
        routed = [
            update(p4r.Update.INSERT, ecmp_group(3, {2: 256, 3: 256, 4: 256, 5: 256})),
            update(p4r.Update.INSERT, next_hops_entry(3, group_id=3)),
            update(p4r.Update.INSERT, route_v4(bytes([10, 9, 0, 0]), 16, group=3)),
        ]
        assert client.write(routed) == [OK] * 3
        assert received(wiring, frame) == [forwarded(frame)]

        # The group moved to members that rewrite the destination MAC: every hop of the set would change.
        moved = update(p4r.Update.MODIFY, ecmp_group(3, {6: 256, 7: 256, 8: 256, 9: 256}))
        trigger.touch()
        try:
            codes = client.write([moved])
        finally:
            trigger.unlink()
        assert codes != [OK]
        # The old sets still forward (the workers get the read lock), the update is refused as the switch refuses
        # any it has no memory for, and the group reads as it was.
        assert received(wiring, frame) == [forwarded(frame)], "frames no longer forwarded after the failed Write"
        assert codes == [RESOURCE_EXHAUSTED], codes
        [group] = client.read([p4r.Entity(action_profile_group=p4r.ActionProfileGroup(action_profile_id=ECMP_SELECTOR, group_id=3))])
        assert sorted(m.member_id for m in group.action_profile_group.members) == [2, 3, 4, 5]

        # The next Write takes the lock and is applied.
        assert client.write([moved], timeout=5) == [OK]
        [out] = received(wiring, frame)
        assert out[:6] == NEW_DST and out[6:] == forwarded(frame)[6:]
    finally:
        client.close()
