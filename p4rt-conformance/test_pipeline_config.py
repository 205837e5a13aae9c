"""SetForwardingPipelineConfig and GetForwardingPipelineConfig, the scenarios of p4lang PI's server tests:
each action, the saved config, the cookie, and reads and writes before any pipeline."""

from __future__ import annotations

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from target import FAILED_PRECONDITION, OK, insert

Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
Get = p4runtime_pb2.GetForwardingPipelineConfigRequest


def get_response(client, response_type=Get.ALL):
    return client.stub.GetForwardingPipelineConfig(Get(device_id=client.device_id, response_type=response_type), timeout=10)


def get(client, response_type=Get.ALL):
    return get_response(client, response_type).config


def test_before_a_pipeline_reads_and_writes_fail_precondition(controllers, program):
    client = arbitrated(controllers)
    with pytest.raises(grpc.RpcError) as caught:
        client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert client.write([insert(program.port_role(1))]) == [FAILED_PRECONDITION]


@pytest.mark.bmv2_deviates("Get before a pipeline is FAILED_PRECONDITION ('No forwarding pipeline config set for this device')")
def test_before_a_pipeline_get_answers_with_no_config(controllers):
    client = arbitrated(controllers)
    # "If a P4Runtime server is in a state where the forwarding-pipeline config is not known, the top-level config
    # field will be unset in the response."
    assert not get_response(client).HasField("config")


def arbitrated(controllers):
    """A primary on a switch without a pipeline."""
    client = controllers((0, 1))
    assert client.arbitrate().status.code == OK
    return client


@pytest.mark.bmv2_deviates("after VERIFY a write is UNAVAILABLE, not FAILED_PRECONDITION, and Get answers an empty config")
def test_verify_checks_without_applying(controllers, program):
    client = arbitrated(controllers)
    client.set_pipeline(program.p4info, Set.VERIFY)
    assert client.write([insert(program.port_role(1))]) == [FAILED_PRECONDITION]
    assert not get(client, Get.P4INFO_AND_COOKIE).HasField("p4info")


@pytest.mark.bmv2_deviates("COMMIT with nothing saved is UNKNOWN ('Error in second phase of device update'), not NOT_FOUND")
def test_commit_without_a_saved_config_is_not_found(controllers, program):
    client = arbitrated(controllers)
    with pytest.raises(grpc.RpcError) as caught:
        client.set_pipeline(None, Set.COMMIT)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.bmv2_deviates("COMMIT with a config is accepted")
def test_commit_with_a_config_is_invalid_argument(controllers, program):
    client = arbitrated(controllers)
    client.set_pipeline(program.p4info, Set.VERIFY_AND_SAVE)
    with pytest.raises(grpc.RpcError) as caught:
        client.set_pipeline(program.p4info, Set.COMMIT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_verify_and_save_then_commit(controllers, program):
    client = arbitrated(controllers)
    client.set_pipeline(program.p4info, Set.VERIFY_AND_SAVE, cookie=7)
    client.set_pipeline(None, Set.COMMIT)
    assert get(client, Get.COOKIE_ONLY).cookie.cookie == 7
    assert client.write([insert(program.port_role(1))]) == [OK]


def test_each_response_type_of_get(primary, program, target):
    primary.set_pipeline(program.p4info, cookie=42)
    full = get(primary)
    assert full.p4info == program.p4info and full.cookie.cookie == 42
    cookie = get(primary, Get.COOKIE_ONLY)
    assert not cookie.HasField("p4info") and cookie.cookie.cookie == 42
    info = get(primary, Get.P4INFO_AND_COOKIE)
    assert info.p4info == program.p4info and info.p4_device_config == b""
    device = get(primary, Get.DEVICE_CONFIG_AND_COOKIE)
    assert not device.HasField("p4info") and device.p4_device_config == target.device_config


def test_a_new_pipeline_clears_the_state(primary, program):
    assert primary.write([insert(program.port_role(1))]) == [OK]
    primary.set_pipeline(program.p4info, Set.VERIFY_AND_COMMIT)
    assert primary.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())]) == []


@pytest.mark.bmv2_deviates("RECONCILE_AND_COMMIT is UNKNOWN ('Error when reconciling config'), even for the program it runs")
def test_reconcile_keeps_the_state(primary, program):
    assert primary.write([insert(program.port_role(1))]) == [OK]
    primary.set_pipeline(program.p4info, Set.RECONCILE_AND_COMMIT)
    assert len(primary.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])) == 1


@pytest.mark.jumbogate_switch_only
def test_a_foreign_p4info_is_invalid_argument(primary, program):
    """jumbogate-switch runs one fixed program and refuses a P4Info other than its own; BMv2 takes any program, so
    this has no BMv2 run."""
    foreign = p4info_pb2.P4Info()
    foreign.CopyFrom(program.p4info)
    foreign.tables[0].size += 1
    with pytest.raises(grpc.RpcError) as caught:
        primary.set_pipeline(foreign)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_an_unspecified_action_is_invalid_argument(primary, program):
    with pytest.raises(grpc.RpcError) as caught:
        primary.set_pipeline(program.p4info, Set.UNSPECIFIED)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.bmv2_deviates("PI reports P4Runtime 1.3.0; the suite checks 1.4.0")
def test_capabilities_names_the_api_version(primary):
    reply = primary.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10)
    assert reply.p4runtime_api_version == "1.4.0"
