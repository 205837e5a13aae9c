"""Stratum's P4RoleConfig, the role config a named P4Runtime role's arbitration carries, built from the field
numbers of stratum/public/proto/p4_role_config.proto written out here rather than taken from the switch's copy of
the .proto, so that a renumbering there is caught. Shared by the switch's tests (protobuf 6) and the conformance
suite (p4lang's bindings, protobuf 3.20): it builds the class with whichever factory the runtime has."""

from __future__ import annotations

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory


def _role_config_class():
    f = descriptor_pb2.FileDescriptorProto(name="stratum_p4_role_config_testlab.proto", package="stratum", syntax="proto3")
    config = f.message_type.add(name="P4RoleConfig")
    packet_filter = config.nested_type.add(name="PacketFilter")
    T = descriptor_pb2.FieldDescriptorProto
    packet_filter.field.add(name="metadata_id", number=1, type=T.TYPE_UINT32, label=T.LABEL_OPTIONAL)
    packet_filter.field.add(name="value", number=2, type=T.TYPE_BYTES, label=T.LABEL_OPTIONAL)
    config.field.add(name="exclusive_p4_ids", number=1, type=T.TYPE_UINT32, label=T.LABEL_REPEATED)
    config.field.add(name="shared_p4_ids", number=2, type=T.TYPE_UINT32, label=T.LABEL_REPEATED)
    config.field.add(name="packet_in_filter", number=3, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL, type_name=".stratum.P4RoleConfig.PacketFilter")
    config.field.add(name="receives_packet_ins", number=4, type=T.TYPE_BOOL, label=T.LABEL_OPTIONAL)
    config.field.add(name="can_push_pipeline", number=5, type=T.TYPE_BOOL, label=T.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("stratum.P4RoleConfig")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.22 and later
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


P4RoleConfig = _role_config_class()


def role_config(exclusive=(), shared=(), receives_packet_ins=False, can_push_pipeline=False, packet_in_filter=None) -> any_pb2.Any:
    """A P4RoleConfig packed as a Stratum client sends it (type.googleapis.com/stratum.P4RoleConfig);
    packet_in_filter is (metadata id, value)."""
    config = P4RoleConfig(
        exclusive_p4_ids=list(exclusive), shared_p4_ids=list(shared), receives_packet_ins=receives_packet_ins, can_push_pipeline=can_push_pipeline
    )
    if packet_in_filter is not None:
        config.packet_in_filter.metadata_id, config.packet_in_filter.value = packet_in_filter
    packed = any_pb2.Any()
    packed.Pack(config)
    return packed


def unpack(config: any_pb2.Any):
    """The P4RoleConfig in an Any (an arbitration's answer echoes it); AssertionError when it holds another type."""
    out = P4RoleConfig()
    assert config.Unpack(out), config.type_url
    return out
