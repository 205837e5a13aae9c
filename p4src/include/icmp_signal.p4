// "Too big" enforcement: MtuEnforcement decides, for a packet larger than
// its MTU, whether it is signalled with an ICMP error, rate-limited, or
// dropped silently with a reason. The original is always dropped; how the
// signal is built is the target's (SignalBuilder in v1model/signal.p4: a
// resubmitted second pass; in tna/signal.p4: a truncated mirrored copy
// rebuilt in egress).
#ifndef JUMBOGATE_ICMP_SIGNAL_P4
#define JUMBOGATE_ICMP_SIGNAL_P4

#include "headers.p4"

control MtuEnforcement(in port_t ingress_port, inout local_metadata_t meta) {
    // One packet-rate meter per ingress port bounds how many ICMP errors a
    // flood of oversized packets can make the switch send. The controller
    // configures it; an unconfigured BMv2 meter is always green.
    PACKET_RATE_METER(ICMP_METER_SIZE) icmp_signal_meter;
    // Before it, a smaller budget per source prefix: one sender flooding
    // oversized packets spends its own cell, not the port's, so it cannot
    // silence the signals every other sender on that port relies on (a
    // path-MTU black hole made for ~100 packets a second).
    PACKET_RATE_METER(ICMP_SOURCE_METER_SIZE) icmp_source_meter;
    HASH_UNIT(source_prefix_hash, 8, crc16)

    bit<16> limit = 0;
    DIFFERENCE_STEP(measure_path_below_limit, meta.cmp.path_below_limit, limit |-| meta.path_mtu)
    DIFFERENCE_STEP(measure_mtu_excess, meta.cmp.mtu_excess, meta.flow.ip_len |-| limit)

    apply {
        // Two fields are compared through a saturating difference tested
        // against zero (comparisons_t says why).
        limit = meta.instance_mtu;
        measure_path_below_limit_table.apply();  // > 0: path_mtu < limit
        if (meta.port_role == PORT_ROLE_INTERNAL && meta.cmp.path_below_limit != 0
                && !(meta.flow.is_tcp && meta.nic_port_set)) {
            // Outbound TCP over the path MTU goes to the SmartNIC to be
            // split (see Steering); everything else must fit the path.
            limit = meta.path_mtu;
        }
        if (meta.port_role == PORT_ROLE_NIC && !meta.instance_known) {
            // Outbound back from the SmartNIC: nothing more will split it.
            limit = meta.path_mtu;
        }
        measure_mtu_excess_table.apply();  // 0: ip_len <= limit
        if (meta.cmp.mtu_excess == 0) {
            return;
        }
        if (!meta.flow.dont_fragment) {
            meta.drop_reason = DROP_MTU_EXCEEDED_NO_DF;
            return;
        }
        if (meta.is_geneve || !meta.flow.signal_allowed) {
            meta.drop_reason = DROP_MTU_EXCEEDED_NO_SIGNAL;
            return;
        }
        flow_addr_t source_prefix = meta.flow.src_addr & 128w0xffffffffffff00000000000000000000;
        if (meta.flow.ip_version == 4) {
            source_prefix = meta.flow.src_addr & 128w0xffffff00;
        }
        bit<32> source_cell;
        HASH_INDEX(source_prefix_hash, crc16, source_cell, ICMP_SOURCE_METER_SIZE,
                   { source_prefix });
        meter_color_t color;
        METER_EXECUTE(icmp_source_meter, source_cell, color);
        if (color != METER_COLOR_RED) {
            METER_EXECUTE(icmp_signal_meter, (bit<32>)ingress_port, color);
        }
        if (color == METER_COLOR_RED) {
            meta.drop_reason = DROP_ICMP_RATE_LIMITED;
            return;
        }
        meta.drop_reason = DROP_MTU_EXCEEDED;
        meta.signal_kind = SIGNAL_IPV6_PACKET_TOO_BIG;
        if (meta.flow.ip_version == 4) {
            meta.signal_kind = SIGNAL_IPV4_FRAG_NEEDED;
        }
        meta.signal_reply_port = ingress_port;
        meta.signal_mtu = limit;
        if (SIGNAL_CARRIES_ADDRESSES) {
            meta.signal_reply_to = meta.flow.src_addr;
            meta.signal_reply_from = meta.flow.dst_addr;
        }
    }
}

#endif
