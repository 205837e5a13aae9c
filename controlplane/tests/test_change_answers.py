"""What the operator API answers to a change committed to a real etcd: what was written, at its revision.

The policy in force can lag a committed change: the read-back after the commit
may fail, and a newer revision of the store may be refused (a key edited by
hand into nonsense) while an older one stays in force. The answer to the
change then still shows what the change wrote, not the policy in force.
"""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from test_store_tls import CONTROLLER_USER, TlsEtcd

from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.server import serve
from jumbogate.store import PREFIX, EtcdStore
from jumbogate.v1 import policy_pb2, policy_pb2_grpc
from testlab.etcd_process import missing_etcd
from testlab.lab import free_tcp_port

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(bool(missing_etcd()), reason="needs etcd and etcdctl (make setup installs them)")]


class Api:
    """A controller's operator API over its store (no switch, no election run), and a client of it."""

    def __init__(self, store: EtcdStore):
        self.address = f"127.0.0.1:{free_tcp_port()}"
        self.controller = Controller(load_config(EXAMPLE), Path("unused"), listen=self.address, store=store)

    async def __aenter__(self) -> Api:
        await self.controller.fleet.start()
        self.server = await serve(self.controller.service, self.address)
        self.channel = grpc.aio.insecure_channel(self.address)
        self.stub = policy_pb2_grpc.PolicyStub(self.channel)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.channel.close()
        await self.server.stop(0)
        await self.controller.fleet.store.close()


def stored(server, key: str):
    return json.loads(server.ctl("get", PREFIX + key, "--print-value-only").stdout)


async def test_the_answer_to_a_change_shows_what_was_written_while_the_newest_revision_is_refused(etcd):
    """Before: SetFleet answered the flag in force (on) with the revision of the refused read-back,
    and SetInstanceJumbo the instance's flag and MTU in force."""
    async with Api(EtcdStore(etcd.store_url)) as api:
        state, policy = api.controller.state, api.controller.fleet
        assert state.fleet_jumbo is True and state.instance_jumbo["legacy-1"] is False
        etcd.ctl("put", PREFIX + "fleet/path_mtus", '"nonsense"')
        instance = await api.stub.SetInstanceJumbo(policy_pb2.SetInstanceJumboRequest(id="legacy-1", jumbo=True), timeout=5)
        assert policy.refused_revisions == 1 and state.instance_jumbo["legacy-1"] is False, "the refused revision is not in force"
        assert stored(etcd, "instances/legacy-1")["jumbo"] is True
        assert instance.jumbo is True and instance.revision == policy.revision
        # With the fleet flag the store holds (on): what the switch enforces once the change is in force.
        assert instance.effective_mtu == api.controller.config.mtu.guest_jumbo
        fleet = await api.stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=False), timeout=5)
        assert policy.refused_revisions == 2 and state.fleet_jumbo is True
        assert stored(etcd, "fleet/jumbo") is False
        assert fleet.jumbo is False and fleet.revision == policy.revision
        # What is in force is still what the reads answer.
        assert (await api.stub.GetFleet(policy_pb2.GetFleetRequest(), timeout=5)).jumbo is True


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory):
    etcd = TlsEtcd(tmp_path_factory.mktemp("etcd-tls"))
    yield etcd
    etcd.server.stop()


async def test_the_answer_to_a_change_whose_read_back_failed_shows_what_was_written(tls_etcd):
    """Before: the change was committed, its read-back refused, and SetFleet answered OK with the flag as it was before.

    The read-back is made to fail for real: the controller's etcd role loses the read of the
    whole policy prefix and keeps only the one key the change writes."""
    server = tls_etcd.server
    server.ctl("del", "--prefix", "/jumbogate/")
    store = EtcdStore(tls_etcd.store_url, tls_etcd.tls(CONTROLLER_USER))
    async with Api(store) as api:
        before = api.controller.fleet.revision
        server.ctl("role", "revoke-permission", "jumbogate", PREFIX, "--prefix")
        server.ctl("role", "grant-permission", "jumbogate", "readwrite", PREFIX + "fleet/jumbo")
        try:
            fleet = await api.stub.SetFleet(policy_pb2.SetFleetRequest(jumbo=False), timeout=10)
        finally:
            server.ctl("role", "revoke-permission", "jumbogate", PREFIX + "fleet/jumbo")
            server.ctl("role", "grant-permission", "jumbogate", "readwrite", PREFIX, "--prefix")
        written = json.loads(server.ctl("get", PREFIX + "fleet/jumbo", "-w", "json").stdout)["kvs"][0]["mod_revision"]
        assert stored(server, "fleet/jumbo") is False
        assert api.controller.fleet.revision == before, "not read back"
        assert fleet.jumbo is False and fleet.revision == written
