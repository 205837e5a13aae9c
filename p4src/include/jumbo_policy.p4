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

// Applied to every packet: it only reads tables and fills metadata, and
// its lookups key on the port's role and the flow alone, so on Tofino they
// run in the first stages. The packet is measured against each MTU found
// (a saturating difference, comparisons_t) beside the instance lookup,
// before the choice, so no stage is spent on measuring after it. (Not in
// the lookups' own actions: a Tofino subtraction cannot take its second
// operand from action data.)
control JumboPolicy(in headers_t hdr, inout local_metadata_t meta) {
    bit<1> instance_jumbo = 0;
    ipv4_addr_t instance_v4 = 0;
    flow_addr_t instance_v6 = 0;

    bit<16> jumbo_mtu = MTU_JUMBO;
    bit<16> standard_mtu = MTU_STANDARD;
    bit<16> over_jumbo;     // IP length |-| the guest jumbo MTU
    bit<16> over_standard;  // IP length |-| the default MTU

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
        instance_jumbo = 0;
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

    // The path MTU of the destination's external route, looked up for
    // every packet and replaced by "no limit" below where no path limit
    // applies.
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

    DIFFERENCE_STEP(measure_against_found_mtus,
        over_jumbo = meta.flow.ip_len |-| jumbo_mtu;
        over_standard = meta.flow.ip_len |-| standard_mtu;
        meta.cmp.over_path = meta.flow.ip_len |-| meta.path_mtu;)

    apply {
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
            path_mtu_v4.apply();
        } else if (meta.flow.ip_version == 6) {
            instances_v6.apply();
            path_mtu_v6.apply();
        } else {
            meta.instance_known = false;
            instance_jumbo = 0;
            meta.path_mtu = 0xffff;
        }
        measure_against_found_mtus_table.apply();

        // The instance's MTU, and the packet's excess over the MTUs that
        // hold for it (MtuEnforcement acts on it): outbound TCP over the
        // path MTU goes to the SmartNIC to be split (see Steering), so only
        // the instance's MTU holds for it; other outbound packets must fit
        // the path too (the bitwise or of two excesses is 0 when both
        // are); what comes back from the SmartNIC outbound must fit the
        // path, as nothing more will split it. Each branch writes every
        // field it decides, from the differences measured before the
        // choice: on Tofino, exclusive branches writing a field share a
        // stage, while a default overwritten later, or a difference taken
        // after the choice, would take one more.
        if (meta.fleet_jumbo == 1 && instance_jumbo == 1) {
            meta.instance_mtu = jumbo_mtu;
            meta.merge_eligible = meta.flow.is_tcp;
            if (meta.port_role == PORT_ROLE_INTERNAL && !(meta.flow.is_tcp && meta.nic_port_set)) {
                meta.cmp.over_limit = over_jumbo | meta.cmp.over_path;
            } else if (meta.port_role == PORT_ROLE_NIC && !meta.instance_known) {
                meta.cmp.over_limit = meta.cmp.over_path;
            } else {
                meta.cmp.over_limit = over_jumbo;
            }
        } else {
            meta.instance_mtu = standard_mtu;
            meta.merge_eligible = false;
            if (meta.port_role == PORT_ROLE_INTERNAL && !(meta.flow.is_tcp && meta.nic_port_set)) {
                meta.cmp.over_limit = over_standard | meta.cmp.over_path;
            } else if (meta.port_role == PORT_ROLE_NIC && !meta.instance_known) {
                meta.cmp.over_limit = meta.cmp.over_path;
            } else {
                meta.cmp.over_limit = over_standard;
            }
        }
        if (meta.port_role == PORT_ROLE_INTERNAL
                || (meta.port_role == PORT_ROLE_NIC && !meta.instance_known)) {
            // The packet leaves through an external route: its path MTU
            // holds.
        } else {
            meta.path_mtu = 0xffff;
            meta.cmp.over_path = 0;
        }
    }
}

#endif
