// "Too big" enforcement: MtuEnforcement decides, for a packet larger than
// its MTU, whether it is signalled with an ICMP error, rate-limited, or
// dropped silently with a reason. The original is always dropped; how the
// signal is built is the target's (SignalBuilder in v1model/signal.p4: a
// resubmitted second pass; in tna/signal.p4: a truncated mirrored copy
// rebuilt in egress).
#ifndef JUMBOGATE_ICMP_SIGNAL_P4
#define JUMBOGATE_ICMP_SIGNAL_P4

#include "headers.p4"

// Applied to every packet, `enforce` saying whether the MTUs hold for it:
// what needs only the flow (the source meter's cell) is then worked out in
// the first stages on Tofino, whether or not it is needed.
control MtuEnforcement(in port_t ingress_port, inout local_metadata_t meta, in flag_t enforce) {
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

    // The source prefix a sender's budget covers: a /24 for IPv4 (in the
    // address's low 32 bits), a /48 for IPv6. A constant table rather than
    // an if statement: one table on Tofino, not one per branch.
    flow_addr_t source_prefix;
    @hidden action source_prefix_v4() {
        source_prefix = meta.flow.src_addr & 128w0xffffff00;
    }
    @hidden action source_prefix_v6() {
        source_prefix = meta.flow.src_addr & 128w0xffffffffffff00000000000000000000;
    }
    @hidden table source_prefix_length {
        key = { meta.flow.ip_version: exact @name("ip_version"); }
        actions = { source_prefix_v4; source_prefix_v6; }
        const entries = {
            4: source_prefix_v4();
        }
        const default_action = source_prefix_v6();
    }

    apply {
        // Worked out before it is known to be needed: the cell of the
        // source meter depends on the flow alone, so on Tofino its mask and
        // hash sit in early stages, off the path of the decision.
        source_prefix_length.apply();
        bit<32> source_cell;
        HASH_INDEX(source_prefix_hash, crc16, source_cell, ICMP_SOURCE_METER_SIZE,
                   { source_prefix });

        // The MTU an ICMP signal announces: the smaller one that holds.
        // Written for every packet, read only with a signal: a local copy
        // would be one more 16-bit field tied to the MTUs' PHV group (16
        // containers on Tofino, which the MTUs and their differences
        // nearly fill).
        if (meta.port_role == PORT_ROLE_INTERNAL && !(meta.flow.is_tcp == 1 && meta.nic_port_set == 1)) {
            meta.signal_mtu = MIN_OF(meta.instance_mtu, meta.path_mtu);
        } else if (meta.port_role == PORT_ROLE_NIC && meta.instance_known == 0) {
            meta.signal_mtu = meta.path_mtu;
        } else {
            meta.signal_mtu = meta.instance_mtu;
        }
        // One chain of else-ifs, no early return: p4c turns a return into
        // a flag that every later statement tests, a stage each on Tofino.
        if (enforce == 0 || meta.cmp.over_limit == 0) {
            // Not held to an MTU (see the top level), or fits it.
        } else if (meta.flow.dont_fragment == 0) {
            meta.drop_reason = DROP_MTU_EXCEEDED_NO_DF;
        } else if (meta.is_geneve || !meta.flow.signal_allowed) {
            meta.drop_reason = DROP_MTU_EXCEEDED_NO_SIGNAL;
        } else {
            meter_color_t color;
            METER_EXECUTE(icmp_source_meter, source_cell, color);
            if (color != METER_COLOR_RED) {
                METER_EXECUTE(icmp_signal_meter, (bit<32>)ingress_port, color);
            }
            if (color == METER_COLOR_RED) {
                meta.drop_reason = DROP_ICMP_RATE_LIMITED;
            } else {
                meta.drop_reason = DROP_MTU_EXCEEDED;
                if (meta.flow.ip_version == 4) {
                    meta.signal_kind = SIGNAL_IPV4_FRAG_NEEDED;
                } else {
                    meta.signal_kind = SIGNAL_IPV6_PACKET_TOO_BIG;
                }
                meta.signal_reply_port = ingress_port;
                if (SIGNAL_CARRIES_ADDRESSES) {
                    meta.signal_reply_to = meta.flow.src_addr;
                    meta.signal_reply_from = meta.flow.dst_addr;
                }
            }
        }
    }
}

#endif
