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
        meta.instance_known = 1;
        instance_jumbo = enabled;
    }
    action instance_unknown() {
        meta.instance_known = 0;
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

    // The instance's MTU, and the packet's excess over the MTUs that hold
    // for it (MtuEnforcement acts on it), for the four cases below and the
    // instance's two MTUs (the guest jumbo MTU only when the fleet flag and
    // the instance's flag are on). Each action picks the excess from the
    // differences measured before the choice: a Tofino action cannot
    // choose a source by its data, so each case is an action of its own.
    //  * held_to_both: outbound and not split by the SmartNIC (not TCP, or
    //    no SmartNIC): the instance's MTU and the path's both hold (the
    //    bitwise or of two excesses is 0 when both are).
    //  * held_to_instance_keep_path: outbound TCP with a SmartNIC: over the
    //    path MTU it goes to be split (see Steering), so only the
    //    instance's MTU holds; the path MTU stays for Steering to test.
    //  * held_to_path: back from the SmartNIC, not to an instance (a split
    //    packet): its path MTU holds, as nothing more will split it.
    //  * held_to_instance: inbound: no path MTU applies.
#define LIMIT_ACTIONS(mtu, over, eligible) \
    @hidden action held_to_both_##mtu() { \
        meta.instance_mtu = mtu; \
        meta.merge_eligible = eligible; \
        meta.cmp.over_limit = over | meta.cmp.over_path; \
    } \
    @hidden action held_to_instance_keep_path_##mtu() { \
        meta.instance_mtu = mtu; \
        meta.merge_eligible = eligible; \
        meta.cmp.over_limit = over; \
    } \
    @hidden action held_to_path_##mtu() { \
        meta.instance_mtu = mtu; \
        meta.merge_eligible = eligible; \
        meta.cmp.over_limit = meta.cmp.over_path; \
    } \
    @hidden action held_to_instance_##mtu() { \
        meta.instance_mtu = mtu; \
        meta.merge_eligible = eligible; \
        meta.cmp.over_limit = over; \
        meta.path_mtu = 0xffff; \
        meta.cmp.over_path = 0; \
    }
    LIMIT_ACTIONS(jumbo_mtu, over_jumbo, meta.flow.is_tcp | meta.flow.is_udp)
    LIMIT_ACTIONS(standard_mtu, over_standard, 0)
#undef LIMIT_ACTIONS

    // One constant table, the first entry that matches deciding: as if
    // statements, nine gateways and tables on Tofino, where a stage holds
    // 16.
    @hidden table limits {
        key = {
            meta.fleet_jumbo: ternary @name("fleet_jumbo");
            instance_jumbo: ternary @name("instance_jumbo");
            meta.port_role: ternary @name("port_role");
            meta.flow.is_tcp: ternary @name("is_tcp");
            meta.nic_port_set: ternary @name("nic_port_set");
            meta.instance_known: ternary @name("instance_known");
        }
        actions = {
            held_to_both_jumbo_mtu; held_to_instance_keep_path_jumbo_mtu;
            held_to_path_jumbo_mtu; held_to_instance_jumbo_mtu;
            held_to_both_standard_mtu; held_to_instance_keep_path_standard_mtu;
            held_to_path_standard_mtu; held_to_instance_standard_mtu;
        }
        const entries = {
            (1, 1, PORT_ROLE_INTERNAL, 1, 1, _): held_to_instance_keep_path_jumbo_mtu();
            (1, 1, PORT_ROLE_INTERNAL, _, _, _): held_to_both_jumbo_mtu();
            (1, 1, PORT_ROLE_NIC, _, _, 0): held_to_path_jumbo_mtu();
            (1, 1, _, _, _, _): held_to_instance_jumbo_mtu();
            (_, _, PORT_ROLE_INTERNAL, 1, 1, _): held_to_instance_keep_path_standard_mtu();
            (_, _, PORT_ROLE_INTERNAL, _, _, _): held_to_both_standard_mtu();
            (_, _, PORT_ROLE_NIC, _, _, 0): held_to_path_standard_mtu();
        }
        const default_action = held_to_instance_standard_mtu();
    }

    // The instance is the destination of inbound traffic and the source of
    // outbound traffic. Back from the SmartNIC a packet may be either: it
    // is inbound when its destination is an instance (a merged packet);
    // otherwise it is outbound (a split one) and its path MTU applies. A
    // constant table rather than an if statement: one table on Tofino, not
    // one per branch.
    @hidden action instance_is_destination() {
        instance_v4 = meta.flow.dst_v4;
        instance_v6 = meta.flow.dst_addr;
    }
    @hidden action instance_is_source() {
        instance_v4 = meta.flow.src_v4;
        instance_v6 = meta.flow.src_addr;
    }
    @hidden table instance_side {
        key = { meta.port_role: exact @name("port_role"); }
        actions = { instance_is_destination; instance_is_source; }
        const entries = {
            PORT_ROLE_EXTERNAL: instance_is_destination();
            PORT_ROLE_NIC: instance_is_destination();
        }
        const default_action = instance_is_source();
    }

    apply {
        fleet_policy.apply();
        instance_side.apply();
        if (meta.flow.ip_version == 4) {
            instances_v4.apply();
            path_mtu_v4.apply();
        } else if (meta.flow.ip_version == 6) {
            instances_v6.apply();
            path_mtu_v6.apply();
        } else {
            meta.instance_known = 0;
            instance_jumbo = 0;
            meta.path_mtu = 0xffff;
        }
        measure_against_found_mtus_table.apply();

        limits.apply();
    }
}

#endif
