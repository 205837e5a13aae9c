// The parser for targets whose parser can add and compare (v1model, and
// jumbogate-switch, which mirrors it): every header jumbogate understands,
// read within the PARSE_DEPTH_BYTES budget. Tofino's parser cannot do that
// arithmetic; p4src/tna/parser.p4 keeps the same budget by construction.
//
// Rules that shape this file:
// * Before a header is extracted the parser checks that it would end at or
//   before PARSE_DEPTH_BYTES. If not, it stops (depth_exceeded) and the rest
//   of the packet stays payload, so a packet forwarded on its outer headers
//   leaves intact. Variable-length headers (IPv4, TCP with options) are
//   checked at their full length, read from a lookahead of their length
//   field, after their fixed part has been checked.
// * Malformed fields never `reject`: the parser records a drop reason in
//   pm.malformed and accepts, and the ingress counts and drops. A header that
//   runs past the end of the packet raises PacketTooShort, which the ingress
//   turns into a drop reason (pm.in_geneve_options tells which).
// * The only loop walks Geneve options, one 4-byte word per iteration,
//   bounded by the 6-bit option length (at most 63 words), the way a
//   hardware parser unrolls a loop into a bounded number of states.
#ifndef JUMBOGATE_PARSER_P4
#define JUMBOGATE_PARSER_P4

#include <core.p4>
#include "headers.p4"

// Does a header of `bytes` bytes, starting at the current depth, end past
// the budget?
#define ENDS_PAST_BUDGET(pm, bytes) ((pm).depth + (bytes) > PARSE_DEPTH_BYTES)

parser EthernetParser(packet_in packet,
                      out ethernet_t ethernet,
                      inout parser_metadata_t pm) {
    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, ETHERNET_BYTES)) {
            true: too_deep;
            false: extract_ethernet;
        }
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_ethernet {
        packet.extract(ethernet);
        pm.depth = pm.depth + ETHERNET_BYTES;
        pm.next = ethernet.ether_type;
        transition accept;
    }
}

parser Ipv4Parser(packet_in packet,
                  out ipv4_t ipv4,
                  out ipv4_options_t options,
                  inout parser_metadata_t pm) {
    bit<16> header_bytes;

    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, IPV4_MIN_BYTES)) {
            true: too_deep;
            false: check_version_and_ihl;
        }
    }
    state check_version_and_ihl {
        bit<8> version_ihl = packet.lookahead<bit<8>>();
        header_bytes = ((bit<16>)version_ihl[3:0]) << 2;
        transition select(version_ihl) {
            8w0x40 &&& 8w0xfc: ihl_invalid;   // IHL 0..3
            8w0x44: ihl_invalid;               // IHL 4
            8w0x40 &&& 8w0xf0: check_depth;
            default: version_mismatch;
        }
    }
    state ihl_invalid {
        pm.malformed = DROP_IPV4_IHL_INVALID;
        transition accept;
    }
    state version_mismatch {
        pm.malformed = DROP_IP_VERSION_MISMATCH;
        transition accept;
    }
    state check_depth {
        transition select(ENDS_PAST_BUDGET(pm, header_bytes)) {
            true: too_deep;
            false: extract_ipv4;
        }
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_ipv4 {
        packet.extract(ipv4);
        pm.depth = pm.depth + header_bytes;
        pm.next = (bit<16>)ipv4.protocol;
        transition select(ipv4.frag_offset) {
            0: check_options;
            default: later_fragment;
        }
    }
    // Only a first fragment (offset 0) starts with the L4 header; later
    // fragments carry payload bytes, which must feed neither steering nor
    // the sketch, nor fail the TCP data-offset check: nothing follows.
    state later_fragment {
        pm.next = NEXT_NONE;
        transition check_options;
    }
    state check_options {
        transition select(ipv4.ihl) {
            5: accept;
            default: extract_options;
        }
    }
    state extract_options {
        packet.extract(options, (bit<32>)((header_bytes - IPV4_MIN_BYTES) << 3));
        transition accept;
    }
}

parser Ipv6Parser(packet_in packet,
                  out ipv6_t ipv6,
                  inout parser_metadata_t pm) {
    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, IPV6_BYTES)) {
            true: too_deep;
            false: check_version;
        }
    }
    state check_version {
        transition select(packet.lookahead<bit<4>>()) {
            6: extract_ipv6;
            default: version_mismatch;
        }
    }
    state version_mismatch {
        pm.malformed = DROP_IP_VERSION_MISMATCH;
        transition accept;
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_ipv6 {
        packet.extract(ipv6);
        pm.depth = pm.depth + IPV6_BYTES;
        pm.next = (bit<16>)ipv6.next_header;
        transition accept;
    }
}

parser TcpParser(packet_in packet,
                 out tcp_t tcp,
                 out tcp_options_t options,
                 inout parser_metadata_t pm) {
    bit<16> header_bytes;

    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, TCP_MIN_BYTES)) {
            true: too_deep;
            false: check_data_offset;
        }
    }
    state check_data_offset {
        // The data offset is the high nibble of the header's 13th byte.
        bit<104> first_bytes = packet.lookahead<bit<104>>();
        header_bytes = ((bit<16>)first_bytes[7:4]) << 2;
        transition select(first_bytes[7:4]) {
            4w0 &&& 4w0xc: data_offset_invalid;   // 0..3
            4w4: data_offset_invalid;
            default: check_depth;
        }
    }
    state data_offset_invalid {
        pm.malformed = DROP_TCP_DATA_OFFSET_INVALID;
        transition accept;
    }
    state check_depth {
        transition select(ENDS_PAST_BUDGET(pm, header_bytes)) {
            true: too_deep;
            false: extract_tcp;
        }
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_tcp {
        packet.extract(tcp);
        pm.depth = pm.depth + header_bytes;
        transition select(tcp.data_offset) {
            5: accept;
            default: extract_options;
        }
    }
    state extract_options {
        packet.extract(options, (bit<32>)((header_bytes - TCP_MIN_BYTES) << 3));
        transition accept;
    }
}

parser UdpParser(packet_in packet,
                 out udp_t udp,
                 inout parser_metadata_t pm) {
    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, UDP_BYTES)) {
            true: too_deep;
            false: extract_udp;
        }
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_udp {
        packet.extract(udp);
        pm.depth = pm.depth + UDP_BYTES;
        pm.next = udp.dst_port;
        transition accept;
    }
}

parser IcmpParser(packet_in packet,
                  out icmp_t icmp,
                  inout parser_metadata_t pm) {
    state start {
        pm.next = NEXT_NONE;
        transition select(ENDS_PAST_BUDGET(pm, ICMP_BYTES)) {
            true: too_deep;
            false: extract_icmp;
        }
    }
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state extract_icmp {
        packet.extract(icmp);
        pm.depth = pm.depth + ICMP_BYTES;
        transition accept;
    }
}

// The whole stack. Each sub-parser either extracts its header and puts the
// field that names the next header in pm.next, or sets pm.depth_exceeded /
// pm.malformed and returns without extracting it, leaving pm.next at
// NEXT_NONE, which matches no case below.
parser JumbogateParser(packet_in packet,
                       out headers_t hdr,
                       inout parser_metadata_t pm) {
    EthernetParser() ethernet_parser;
    EthernetParser() inner_ethernet_parser;
    Ipv4Parser() ipv4_parser;
    Ipv4Parser() inner_ipv4_parser;
    Ipv6Parser() ipv6_parser;
    Ipv6Parser() inner_ipv6_parser;
    TcpParser() tcp_parser;
    TcpParser() inner_tcp_parser;
    UdpParser() udp_parser;
    UdpParser() inner_udp_parser;
    IcmpParser() icmp_parser;
    bit<8> geneve_words_left;

    state start {
        pm.depth = 0;
        pm.depth_exceeded = false;
        pm.malformed = DROP_NONE;
        pm.in_geneve_options = false;
        ethernet_parser.apply(packet, hdr.ethernet, pm);
        transition select(pm.next) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_vlan {
        transition select(ENDS_PAST_BUDGET(pm, VLAN_BYTES)) {
            true: too_deep;
            false: extract_vlan;
        }
    }
    state extract_vlan {
        packet.extract(hdr.vlan);
        pm.depth = pm.depth + VLAN_BYTES;
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state too_deep {
        pm.in_geneve_options = false;
        pm.depth_exceeded = true;
        transition accept;
    }

    state parse_ipv4 {
        ipv4_parser.apply(packet, hdr.ipv4, hdr.ipv4_options, pm);
        transition select(pm.next) {
            (bit<16>)IP_PROTO_TCP: parse_tcp;
            (bit<16>)IP_PROTO_UDP: parse_udp;
            (bit<16>)IP_PROTO_ICMP: parse_icmp;
            default: accept;
        }
    }
    state parse_ipv6 {
        ipv6_parser.apply(packet, hdr.ipv6, pm);
        transition select(pm.next) {
            (bit<16>)IP_PROTO_TCP: parse_tcp;
            (bit<16>)IP_PROTO_UDP: parse_udp;
            (bit<16>)IP_PROTO_ICMPV6: parse_icmp;
            default: accept;
        }
    }
    state parse_tcp {
        tcp_parser.apply(packet, hdr.tcp, hdr.tcp_options, pm);
        transition accept;
    }
    state parse_icmp {
        icmp_parser.apply(packet, hdr.icmp, pm);
        transition accept;
    }
    state parse_udp {
        udp_parser.apply(packet, hdr.udp, pm);
        transition select(pm.next) {
            UDP_PORT_GENEVE: parse_geneve;
            default: accept;
        }
    }

    // Geneve header, then its options as opaque words (the border forwards
    // them, it does not interpret them). One word per iteration, each checked
    // against the budget; at most 63 iterations (6-bit option length).
    state parse_geneve {
        transition select(ENDS_PAST_BUDGET(pm, GENEVE_BYTES)) {
            true: too_deep;
            false: extract_geneve;
        }
    }
    state extract_geneve {
        packet.extract(hdr.geneve);
        pm.depth = pm.depth + GENEVE_BYTES;
        geneve_words_left = (bit<8>)hdr.geneve.opt_len;
        pm.in_geneve_options = true;
        transition next_geneve_option_word;
    }
    state next_geneve_option_word {
        transition select(geneve_words_left) {
            0: geneve_options_done;
            default: check_geneve_option_word;
        }
    }
    state check_geneve_option_word {
        transition select(ENDS_PAST_BUDGET(pm, GENEVE_WORD_BYTES)) {
            true: too_deep;
            false: extract_geneve_option_word;
        }
    }
    state extract_geneve_option_word {
        packet.extract(hdr.geneve_options.next);
        pm.depth = pm.depth + GENEVE_WORD_BYTES;
        geneve_words_left = geneve_words_left - 1;
        transition next_geneve_option_word;
    }
    state geneve_options_done {
        pm.in_geneve_options = false;
        transition select(hdr.geneve.protocol_type) {
            ETHERTYPE_TRANSPARENT_BRIDGING: parse_inner_ethernet;
            default: accept;
        }
    }
    state parse_inner_ethernet {
        inner_ethernet_parser.apply(packet, hdr.inner_ethernet, pm);
        transition select(pm.next) {
            ETHERTYPE_IPV4: parse_inner_ipv4;
            ETHERTYPE_IPV6: parse_inner_ipv6;
            default: accept;
        }
    }
    state parse_inner_ipv4 {
        inner_ipv4_parser.apply(packet, hdr.inner_ipv4, hdr.inner_ipv4_options, pm);
        transition select(pm.next) {
            (bit<16>)IP_PROTO_TCP: parse_inner_tcp;
            (bit<16>)IP_PROTO_UDP: parse_inner_udp;
            default: accept;
        }
    }
    state parse_inner_ipv6 {
        inner_ipv6_parser.apply(packet, hdr.inner_ipv6, pm);
        transition select(pm.next) {
            (bit<16>)IP_PROTO_TCP: parse_inner_tcp;
            (bit<16>)IP_PROTO_UDP: parse_inner_udp;
            default: accept;
        }
    }
    state parse_inner_tcp {
        inner_tcp_parser.apply(packet, hdr.inner_tcp, hdr.inner_tcp_options, pm);
        transition accept;
    }
    state parse_inner_udp {
        inner_udp_parser.apply(packet, hdr.inner_udp, pm);
        transition accept;
    }
}

#endif
