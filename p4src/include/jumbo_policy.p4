// Per-instance jumbo policy: which MTU applies to the instance a packet goes
// to (from an external port) or comes from (from an internal port), and the
// path MTU of the external route for outbound packets.
//
// Effective instance MTU = the guest jumbo MTU only when the fleet flag AND
// the instance's flag are on; the standard MTU otherwise, and for addresses
// the controller did not list. The fleet flag and both MTUs are one entry
// (the default action of a keyless table): one write switches the whole
// fleet back, and the MTUs are the operator's (rack.yaml mtu.guest_jumbo and
// mtu.default_external), not constants of this program. MTU_JUMBO,
// MTU_STANDARD and MTU_IPV6_MINIMUM (the default path MTUs) are only what a
// switch enforces before a controller came.
#ifndef JUMBOGATE_JUMBO_POLICY_P4
#define JUMBOGATE_JUMBO_POLICY_P4

#include "headers.p4"

control JumboPolicy(in headers_t hdr, inout local_metadata_t meta) {
    bit<1> instance_jumbo = 0;
    ipv4_addr_t instance_v4 = 0;
    flow_addr_t instance_v6 = 0;

    bit<16> jumbo_mtu = MTU_JUMBO;
    bit<16> standard_mtu = MTU_STANDARD;

    action set_fleet_jumbo(bit<1> enabled, bit<16> guest_jumbo_mtu, bit<16> default_mtu) {
        meta.fleet_jumbo = enabled;
        jumbo_mtu = guest_jumbo_mtu;
        standard_mtu = default_mtu;
    }
    table fleet_policy {
        key = {}
        actions = { set_fleet_jumbo; }
        default_action = set_fleet_jumbo(0, MTU_JUMBO, MTU_STANDARD);
        size = 1;
    }

    action set_instance_jumbo(bit<1> enabled) {
        meta.instance_known = true;
        instance_jumbo = enabled;
    }
    action instance_unknown() {
        meta.instance_known = false;
    }
    table instances_v4 {
        key = { instance_v4: exact @name("instance_addr"); }
        actions = { set_instance_jumbo; @defaultonly instance_unknown; }
        const default_action = instance_unknown();
        size = 16384;
    }
    table instances_v6 {
        key = { instance_v6: exact @name("instance_addr"); }
        actions = { set_instance_jumbo; @defaultonly instance_unknown; }
        const default_action = instance_unknown();
        size = 16384;
    }

    action set_path_mtu(bit<16> mtu) {
        meta.path_mtu = mtu;
    }
    table path_mtu_v4 {
        key = { meta.flow.dst_v4: lpm @name("dst_addr"); }
        actions = { set_path_mtu; }
        default_action = set_path_mtu(MTU_STANDARD);
        size = 1024;
    }
    table path_mtu_v6 {
        key = { meta.flow.dst_addr: lpm @name("dst_addr"); }
        actions = { set_path_mtu; }
        default_action = set_path_mtu(MTU_IPV6_MINIMUM);
        size = 1024;
    }

    apply {
        meta.instance_known = false;
        meta.fleet_jumbo = 0;
        // No path limit unless the packet leaves through an external route.
        meta.path_mtu = 0xffff;
        fleet_policy.apply();

        // The instance is the destination of inbound traffic and the source
        // of outbound traffic. Back from the SmartNIC a packet may be
        // either: it is inbound when its destination is an instance (a
        // merged packet); otherwise it is outbound (a split one) and its
        // path MTU applies.
        if (meta.port_role == PORT_ROLE_EXTERNAL || meta.port_role == PORT_ROLE_NIC) {
            instance_v4 = meta.flow.dst_v4;
            instance_v6 = meta.flow.dst_addr;
        } else {
            instance_v4 = meta.flow.src_v4;
            instance_v6 = meta.flow.src_addr;
        }
        if (meta.flow.ip_version == 4) {
            instances_v4.apply();
        } else if (meta.flow.ip_version == 6) {
            instances_v6.apply();
        }
        meta.instance_mtu = standard_mtu;
        meta.merge_eligible = false;
        if (meta.fleet_jumbo == 1 && instance_jumbo == 1) {
            meta.instance_mtu = jumbo_mtu;
            if (meta.flow.is_tcp) {
                meta.merge_eligible = true;
            }
        }

        if (meta.port_role == PORT_ROLE_INTERNAL
                || (meta.port_role == PORT_ROLE_NIC && !meta.instance_known)) {
            if (meta.flow.ip_version == 4) {
                path_mtu_v4.apply();
            } else if (meta.flow.ip_version == 6) {
                path_mtu_v6.apply();
            }
        }
    }
}

#endif
