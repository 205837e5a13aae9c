// "Too big" enforcement and the ICMP signal the switch generates itself.
//
// MtuEnforcement (first pass) decides, for a packet larger than its MTU,
// whether it is signalled, rate-limited, or dropped silently with a reason.
// A signalled packet is resubmitted with meta.signal preserved; the original
// is dropped.
//
// SignalBuilder (second pass) turns the resubmitted copy into the ICMP error.
// Why a second pass: the ICMP checksum must cover exactly the quoted bytes,
// and a v1model checksum over the payload sees the payload *before*
// truncation. On the resubmitted copy the parser extracts the quote (548
// bytes for IPv4, 1232 for IPv6) as one header, so the checksum is a plain
// header checksum and truncate() then cuts the rest of the original.
// A Tofino top level would instead mirror with a truncating session and
// compute the ICMP checksum in the egress deparser.
#ifndef JUMBOGATE_ICMP_SIGNAL_P4
#define JUMBOGATE_ICMP_SIGNAL_P4

#include "headers.p4"

control MtuEnforcement(in port_t ingress_port, inout local_metadata_t meta) {
#ifdef TARGET_V1MODEL
    // One packet-rate meter per ingress port bounds how many ICMP errors a
    // flood of oversized packets can make the switch send. The controller
    // configures it; an unconfigured BMv2 meter is always green.
    meter(ICMP_METER_SIZE, MeterType.packets) icmp_signal_meter;
    // Before it, a smaller budget per source prefix: one sender flooding
    // oversized packets spends its own cell, not the port's, so it cannot
    // silence the signals every other sender on that port relies on (a
    // path-MTU black hole made for ~100 packets a second).
    meter(ICMP_SOURCE_METER_SIZE, MeterType.packets) icmp_source_meter;
#endif

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
        hash(source_cell, HashAlgorithm.crc16, 32w0, { source_prefix },
             (bit<32>)ICMP_SOURCE_METER_SIZE);
        bit<2> color;
        icmp_source_meter.execute_meter(source_cell, color);
        if (color != 2) {  // not red
            icmp_signal_meter.execute_meter((bit<32>)ingress_port, color);
        }
        if (color == 2) {
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

control SignalBuilder(inout headers_t hdr,
                      inout local_metadata_t meta,
                      out port_t egress_port,
                      out bit<32> frame_bytes) {
    ipv4_addr_t source_v4 = 0;
    ipv6_addr_t source_v6 = 0;

    // The address the ICMP error comes from: the switch's own addresses when
    // the controller sets them, else the address the offending packet was
    // sent to (the instance "answers" for its own MTU).
    action set_signal_source(ipv4_addr_t ipv4, ipv6_addr_t ipv6) {
        source_v4 = ipv4;
        source_v6 = ipv6;
    }
    action signal_from_original_destination() {
        source_v4 = meta.signal_reply_from[31:0];
        source_v6 = meta.signal_reply_from;
    }
    table signal_source {
        key = {}
        actions = { set_signal_source; signal_from_original_destination; }
        default_action = signal_from_original_destination();
        size = 1;
    }

    apply {
        signal_source.apply();
        egress_port = meta.signal_reply_port;
        mac_addr_t original_dst = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = original_dst;
        bit<32> l2_bytes = hdr.vlan.isValid() ? 32w18 : 32w14;

        hdr.signal_icmp.setValid();
        hdr.signal_icmp.checksum = 0;  // computed in the checksum stage
        hdr.signal_icmp.rest = (bit<32>)meta.signal_mtu;
        if (hdr.icmpv4_quote.isValid()) {
            hdr.signal_icmp.icmp_type = ICMPV4_TYPE_DEST_UNREACHABLE;
            hdr.signal_icmp.code = ICMPV4_CODE_FRAGMENTATION_NEEDED;
            hdr.signal_ipv4.setValid();
            hdr.signal_ipv4.version = 4;
            hdr.signal_ipv4.ihl = 5;
            hdr.signal_ipv4.dscp = 0;
            hdr.signal_ipv4.ecn = 0;
            hdr.signal_ipv4.total_len = IPV4_MIN_BYTES + ICMP_BYTES + ICMPV4_QUOTE_BYTES;
            hdr.signal_ipv4.identification = 0;
            hdr.signal_ipv4.flag_reserved = 0;
            hdr.signal_ipv4.flag_dont_fragment = 0;
            hdr.signal_ipv4.flag_more_fragments = 0;
            hdr.signal_ipv4.frag_offset = 0;
            hdr.signal_ipv4.ttl = SIGNAL_TTL;
            hdr.signal_ipv4.protocol = IP_PROTO_ICMP;
            hdr.signal_ipv4.hdr_checksum = 0;
            hdr.signal_ipv4.src_addr = source_v4;
            hdr.signal_ipv4.dst_addr = meta.signal_reply_to[31:0];
            frame_bytes = l2_bytes + (bit<32>)hdr.signal_ipv4.total_len;
        } else {
            hdr.signal_icmp.icmp_type = ICMPV6_TYPE_PACKET_TOO_BIG;
            hdr.signal_icmp.code = 0;
            hdr.signal_ipv6.setValid();
            hdr.signal_ipv6.version = 6;
            hdr.signal_ipv6.traffic_class = 0;
            hdr.signal_ipv6.flow_label = 0;
            hdr.signal_ipv6.payload_len = ICMP_BYTES + ICMPV6_QUOTE_BYTES;
            meta.signal_upper_len = (bit<32>)hdr.signal_ipv6.payload_len;
            hdr.signal_ipv6.next_header = IP_PROTO_ICMPV6;
            hdr.signal_ipv6.hop_limit = SIGNAL_TTL;
            hdr.signal_ipv6.src_addr = source_v6;
            hdr.signal_ipv6.dst_addr = meta.signal_reply_to;
            frame_bytes = l2_bytes + (bit<32>)IPV6_BYTES
                          + (bit<32>)hdr.signal_ipv6.payload_len;
        }
    }
}

#endif
