// The v1model ICMP signal: SignalBuilder turns the resubmitted copy of a
// signalled packet (see MtuEnforcement in ../include/icmp_signal.p4) into
// the ICMP error.
//
// Why a second pass: the ICMP checksum must cover exactly the quoted bytes,
// and a v1model checksum over the payload sees the payload *before*
// truncation. On the resubmitted copy the parser extracts the quote (548
// bytes for IPv4, 1232 for IPv6) as one header, so the checksum is a plain
// header checksum and truncate() then cuts the rest of the original.
#ifndef JUMBOGATE_V1MODEL_SIGNAL_P4
#define JUMBOGATE_V1MODEL_SIGNAL_P4

#include "../include/headers.p4"

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
