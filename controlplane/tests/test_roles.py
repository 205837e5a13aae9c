"""The operator API's roles hold for every kind of method, over real mutual TLS.

The API has unary and server-streaming methods today; a client-streaming or
bidirectional one added later must not slip past the roles, and a method
nobody listed as a read needs the admin role.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.pki import make_pki
from jumbogate.server import serve
from jumbogate.tls import RoleInterceptor, TlsConfig, server_credentials
from jumbogate.v1 import policy_pb2, policy_pb2_grpc
from testlab import lab

SERVICE = "jumbogate.test.Probe"


def echo_handlers() -> grpc.GenericRpcHandler:
    async def unary_unary(request, context):
        return request

    async def unary_stream(request, context):
        yield request

    async def stream_unary(requests, context):
        return b"".join([item async for item in requests])

    async def stream_stream(requests, context):
        async for item in requests:
            yield item

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "UnaryUnary": grpc.unary_unary_rpc_method_handler(unary_unary),
            "UnaryStream": grpc.unary_stream_rpc_method_handler(unary_stream),
            "StreamUnary": grpc.stream_unary_rpc_method_handler(stream_unary),
            "StreamStream": grpc.stream_stream_rpc_method_handler(stream_stream),
            # Named as a read (tls.READING_METHODS): a read-only client may call it.
            "GetStats": grpc.unary_unary_rpc_method_handler(unary_unary),
        },
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("roles"), {"server": ["127.0.0.1"], "ops": [], "viewer": [], "stranger": []}, clients={"ops", "viewer", "stranger"})


async def call_every_kind(pki, holder: str) -> dict[str, grpc.StatusCode]:
    tls = TlsConfig(ca=pki.ca, cert=pki["server"].cert, key=pki["server"].key, admins=frozenset({"ops"}), read_only=frozenset({"viewer"}))
    server = grpc.aio.server(interceptors=[RoleInterceptor(tls)])
    server.add_generic_rpc_handlers((echo_handlers(),))
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    server.add_secure_port(address, server_credentials(tls))
    await server.start()
    identity = pki[holder]
    creds = grpc.ssl_channel_credentials(pki.ca.read_bytes(), identity.key.read_bytes(), identity.cert.read_bytes())
    codes = {}
    try:
        async with grpc.aio.secure_channel(address, creds) as channel:
            calls = {
                "UnaryUnary": lambda: channel.unary_unary(f"/{SERVICE}/UnaryUnary")(b"x", timeout=5),
                "UnaryStream": lambda: _collect(channel.unary_stream(f"/{SERVICE}/UnaryStream")(b"x", timeout=5)),
                "StreamUnary": lambda: channel.stream_unary(f"/{SERVICE}/StreamUnary")(iter([b"x", b"y"]), timeout=5),
                "StreamStream": lambda: _collect(channel.stream_stream(f"/{SERVICE}/StreamStream")(iter([b"x"]), timeout=5)),
                "GetStats": lambda: channel.unary_unary(f"/{SERVICE}/GetStats")(b"x", timeout=5),
            }
            for name, call in calls.items():
                try:
                    await call()
                    codes[name] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as err:
                    codes[name] = err.code()
    finally:
        await server.stop(0)
    return codes


async def _collect(stream):
    return [item async for item in stream]


def test_an_admin_calls_every_kind_of_method(pki):
    assert set(asyncio.run(call_every_kind(pki, "ops")).values()) == {grpc.StatusCode.OK}


def test_a_read_only_client_calls_only_the_listed_reads(pki):
    codes = asyncio.run(call_every_kind(pki, "viewer"))
    assert codes.pop("GetStats") == grpc.StatusCode.OK
    assert set(codes.values()) == {grpc.StatusCode.PERMISSION_DENIED}, codes


def test_a_client_without_a_role_calls_nothing_of_any_kind(pki):
    codes = asyncio.run(call_every_kind(pki, "stranger"))
    assert set(codes.values()) == {grpc.StatusCode.PERMISSION_DENIED}, codes


async def _watch_streams(pki) -> None:
    """Watch streams that a read-only certificate could open without end: each cost the controller a
    queue and a copy of every event (4,000 of them made every change 240 times slower)."""
    example = Path(__file__).resolve().parents[1] / "rack.example.yaml"
    tls = TlsConfig(ca=pki.ca, cert=pki["server"].cert, key=pki["server"].key, admins=frozenset({"ops"}), read_only=frozenset({"viewer"}))
    address = f"127.0.0.1:{lab.free_tcp_port()}"
    controller = Controller(load_config(example), Path("unused"), listen=address)
    bus = controller.state.events
    bus.max_watchers = bus.max_per_caller + 4
    server = await serve(controller.service, address, tls)

    def channel(holder: str) -> grpc.aio.Channel:
        identity = pki[holder]
        return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(pki.ca.read_bytes(), identity.key.read_bytes(), identity.cert.read_bytes()))

    async def opened(stub) -> grpc.aio.UnaryStreamCall:
        """A Watch stream, once the server holds it (its first event), or the error it ended with."""
        call = stub.Watch(policy_pb2.WatchRequest(), timeout=30)
        await asyncio.sleep(0)
        before = bus.watchers
        deadline = asyncio.get_running_loop().time() + 10
        while bus.watchers == before and call.done() is False and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        return call

    viewer, ops = channel("viewer"), channel("ops")
    try:
        viewer_stub, ops_stub = policy_pb2_grpc.PolicyStub(viewer), policy_pb2_grpc.PolicyStub(ops)
        mine = [await opened(viewer_stub) for _ in range(bus.max_per_caller)]
        assert bus.watchers == bus.max_per_caller and not any(call.done() for call in mine)
        refused = await opened(viewer_stub)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await refused.read()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
        assert "per caller" in caught.value.details()
        # Another caller is not held to this one's share, only to the total.
        theirs = [await opened(ops_stub) for _ in range(4)]
        assert bus.watchers == bus.max_watchers and not any(call.done() for call in theirs)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await (await opened(ops_stub)).read()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # A stream closed makes room again.
        mine.pop().cancel()
        deadline = asyncio.get_running_loop().time() + 10
        while bus.watchers == bus.max_watchers and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        again = await opened(viewer_stub)
        assert not again.done() and bus.watchers == bus.max_watchers
        stats = await ops_stub.GetStats(policy_pb2.GetStatsRequest(), timeout=10)
        assert (stats.watch_streams.open, stats.watch_streams.refused) == (bus.max_watchers, 2)
        assert (stats.watch_streams.max, stats.watch_streams.max_per_caller) == (bus.max_watchers, bus.max_per_caller)
        for call in [*mine, *theirs, again]:
            call.cancel()
    finally:
        await viewer.close()
        await ops.close()
        await server.stop(0)


@pytest.mark.timeout(120)
def test_watch_streams_are_bounded_per_caller_and_in_all_and_refusals_counted(pki):
    asyncio.run(_watch_streams(pki))
