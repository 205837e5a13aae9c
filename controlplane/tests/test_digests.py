"""Elephant digests: a storm is shed into a counter, the rest onloaded in batches."""

import asyncio
from pathlib import Path

import finsy as fy
from finsy.proto import p4r

from jumbogate import controller
from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.p4 import names

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "controlplane" / "rack.example.yaml"
SCHEMA = fy.P4Schema(REPO / "p4src" / "compiled" / "depth256" / "jumbogate.p4info.txtpb")


def digest(src_port: int, dst: int = int.from_bytes(bytes([10, 10, 0, 10])), dport: int = 5201):
    return digest_with(src_port=src_port, dst_addr=dst, dst_port=dport)


def test_storm_is_bounded_and_counted():
    ctl = Controller(load_config(EXAMPLE), Path("unused"))
    storm = controller.DIGEST_QUEUE_SIZE + 500
    ctl.enqueue_digests(digest(1024 + i) for i in range(storm))
    assert ctl.digests_received == storm
    assert ctl.digests_shed == 500
    assert ctl._digest_queue.qsize() == controller.DIGEST_QUEUE_SIZE


def test_batches_onload_eligible_flows_once():
    ctl = Controller(load_config(EXAMPLE), Path("unused"))
    legacy = int.from_bytes(bytes([10, 10, 0, 20]))
    ctl.enqueue_digests([digest(1000), digest(1000), digest(1001), digest(1002, dst=legacy)])
    assert ctl.onload_digest_batch() == 4
    assert sorted(f.src_port for f in ctl.state.flows) == [1000, 1001], "duplicates collapse; the legacy instance is not eligible"
    kinds = [e.kind.value for e in ctl.state.events.history]
    assert kinds.count("elephant_detected") == 2 and kinds.count("flow_onloaded") == 2


def test_one_batch_takes_at_most_the_batch_size():
    ctl = Controller(load_config(EXAMPLE), Path("unused"))
    ctl.enqueue_digests(digest(2000 + i) for i in range(controller.DIGEST_BATCH + 10))
    assert ctl.onload_digest_batch() == controller.DIGEST_BATCH
    assert ctl.onload_digest_batch() == 10


def test_udp_digests_onload_nothing():
    """UDP to a jumbo instance may take the merge path (as caravans) only when an
    operator lists it: the switch counts no UDP in its sketch, so a digest naming
    one is forged, counted as refused, and onloads nothing, though the same flow
    is merge-eligible."""
    ctl = Controller(load_config(EXAMPLE), Path("unused"))
    ctl.enqueue_digests([digest_with(protocol=17, src_port=4100), digest(4101)])
    assert ctl.onload_digest_batch() == 2
    assert [(f.protocol, f.src_port) for f in ctl.state.flows] == [(6, 4101)]
    assert ctl.digests_refused == 1, "counted as forged"
    udp = next(iter(ctl.state.flows)).__class__.parse("203.0.113.7", "10.10.0.10", 17, 4100, 5201)
    assert ctl.state.merge_eligible(udp) and not ctl.state.elephant_eligible(udp)


def test_forged_flows_are_refused_and_the_worker_goes_on():
    """A sketch counts forged packets too: a digest naming port 0 or another
    protocol once raised out of the worker that onloads elephants, and no
    elephant was onloaded after it until the controller restarted."""

    async def run() -> Controller:
        ctl = Controller(load_config(EXAMPLE), Path("unused"))
        worker = asyncio.get_running_loop().create_task(ctl._digest_worker())
        forged = [digest(0), digest(3000, dport=0), digest_with(protocol=1), digest_with(ip_version=5)]
        ctl.enqueue_digests([*forged, digest(3001)])
        for _ in range(200):
            if ctl.state.flows or worker.done():
                break
            await asyncio.sleep(0.01)
        assert not worker.done(), worker.exception()
        worker.cancel()
        return ctl

    ctl = asyncio.run(run())
    assert [f.src_port for f in ctl.state.flows] == [3001]
    assert ctl.digests_refused == 4
    assert asyncio.run(ctl.stats()).digests_refused == 4


def digest_with(**fields):
    """One elephant_digest_t item as the controller gets it: encoded into a
    P4Runtime DigestList against the compiled P4Info, decoded by finsy."""
    spec = SCHEMA.digests[names.ELEPHANT_DIGEST]
    values = {"ip_version": 4, "src_addr": 0xCB007107, "dst_addr": 0x0A0A000A, "protocol": 6, "src_port": 4000, "dst_port": 5201, "estimated_bytes": 1}
    values.update(fields)
    message = p4r.StreamMessageResponse(digest=p4r.DigestList(digest_id=spec.id, list_id=1, data=[spec.type_spec.encode_data(values)]))
    (item,) = fy.P4DigestList.decode(message, SCHEMA)
    return item
