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

    apply {
        bit<16> limit = meta.instance_mtu;
        if (meta.port_role == PORT_ROLE_INTERNAL && meta.path_mtu < limit
                && !(meta.flow.is_tcp && meta.nic_port_set)) {
            // Outbound TCP over the path MTU goes to the SmartNIC to be
            // split (see Steering); everything else must fit the path.
            limit = meta.path_mtu;
        }
        if (meta.port_role == PORT_ROLE_NIC && !meta.instance_known) {
            // Outbound back from the SmartNIC: nothing more will split it.
            limit = meta.path_mtu;
        }
        if (meta.flow.ip_len <= limit) {
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
        flow_addr_t source_prefix = meta.flow.ip_version == 4
            ? meta.flow.src_addr & 128w0xffffff00
            : meta.flow.src_addr & 128w0xffffffffffff00000000000000000000;
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
        meta.signal_kind = meta.flow.ip_version == 4
            ? SIGNAL_IPV4_FRAG_NEEDED : SIGNAL_IPV6_PACKET_TOO_BIG;
        meta.signal_reply_port = ingress_port;
        meta.signal_mtu = limit;
        meta.signal_reply_to = meta.flow.src_addr;
        meta.signal_reply_from = meta.flow.dst_addr;
    }
}

#endif
