"""The operator API's roles hold for every kind of method, over real mutual TLS.

The API has unary and server-streaming methods today; a client-streaming or
bidirectional one added later must not slip past the roles, and a method
nobody listed as a read needs the admin role.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from jumbogate.pki import make_pki
from jumbogate.tls import RoleInterceptor, TlsConfig, server_credentials
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
