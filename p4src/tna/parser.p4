// The TNA ingress parser: the headers of ../include/parser.p4, within the
// same PARSE_DEPTH_BYTES budget, in the form Tofino's parser can run.
//
// Why not the shared parser: Tofino's parser matches on packet bytes and
// writes constants or extracted fields; it cannot add lengths or compare a
// running depth with the budget, nor extract a varbit sized by a field it
// has just read. So here:
// * IPv4 options are read as 4-byte words, one state per word count,
//   chosen by the IHL. TCP options are not read at all: nothing after TCP
//   is parsed, so they stay payload and leave as they came, and the 32 PHV
//   bits a word would cost (640 for both TCP headers) are what a Tofino 1
//   pipeline lacks.
// * The budget holds by construction: with at most TNA_GENEVE_OPTION_WORDS
//   Geneve option words (tna/target.p4), the deepest header any path can
//   reach (VLAN, outer IPv4 with 40 option bytes, UDP, Geneve, the options,
//   inner Ethernet, inner IPv4 and TCP with 40 option bytes each) ends
//   within PARSE_DEPTH_BYTES. Longer Geneve options stop the parse there
//   (depth_exceeded) and the rest of the frame stays payload, so a packet
//   forwarded on its outer headers leaves intact, as on v1model.
// * Malformed fields never reject: the header is extracted, the drop reason
//   recorded in pm.malformed, and the parse accepts, as on v1model.
// * The parser's depth counter is not kept (pm.depth stays 0): nothing
//   reads it but the v1model parser itself.
#ifndef JUMBOGATE_TNA_PARSER_P4
#define JUMBOGATE_TNA_PARSER_P4

#include "../include/headers.p4"

// One state reads all `n` option words of a header into their own stack
// slots: Tofino's parser resolves `.next` per state, so a state reached
// with different numbers of words already read cannot use it.
#define WORDS_1(s) packet.extract(s[0]);
#define WORDS_2(s) WORDS_1(s) packet.extract(s[1]);
#define WORDS_3(s) WORDS_2(s) packet.extract(s[2]);
#define WORDS_4(s) WORDS_3(s) packet.extract(s[3]);
#define WORDS_5(s) WORDS_4(s) packet.extract(s[4]);
#define WORDS_6(s) WORDS_5(s) packet.extract(s[5]);
#define WORDS_7(s) WORDS_6(s) packet.extract(s[6]);
#define WORDS_8(s) WORDS_7(s) packet.extract(s[7]);
#define WORDS_9(s) WORDS_8(s) packet.extract(s[8]);
#define WORDS_10(s) WORDS_9(s) packet.extract(s[9]);
#define WORDS_11(s) WORDS_10(s) packet.extract(s[10]);
#define WORDS_12(s) WORDS_11(s) packet.extract(s[11]);
#define WORDS_13(s) WORDS_12(s) packet.extract(s[12]);
#define WORDS_14(s) WORDS_13(s) packet.extract(s[13]);
#define WORDS_15(s) WORDS_14(s) packet.extract(s[14]);
#define WORDS_16(s) WORDS_15(s) packet.extract(s[15]);
#define OPTION_WORDS_STATE(name, n, stack, then) \
    state name { WORDS_##n(stack) transition then; }

parser TnaJumbogateParser(packet_in packet,
                          out headers_t hdr,
                          out parser_metadata_t pm) {
    state start {
        pm.depth = 0;
        pm.depth_exceeded = false;
        pm.malformed = DROP_NONE;
        pm.in_geneve_options = false;
        pm.next = NEXT_NONE;
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    // -- outer (or only) IPv4
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 0 .. 4): ipv4_ihl_invalid;
            (4, 5): ipv4_l4;
            (4, 6): ipv4_options_1;
            (4, 7): ipv4_options_2;
            (4, 8): ipv4_options_3;
            (4, 9): ipv4_options_4;
            (4, 10): ipv4_options_5;
            (4, 11): ipv4_options_6;
            (4, 12): ipv4_options_7;
            (4, 13): ipv4_options_8;
            (4, 14): ipv4_options_9;
            (4, 15): ipv4_options_10;
            default: ip_version_mismatch;
        }
    }
    OPTION_WORDS_STATE(ipv4_options_10, 10, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_9, 9, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_8, 8, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_7, 7, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_6, 6, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_5, 5, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_4, 4, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_3, 3, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_2, 2, hdr.ipv4_options, ipv4_l4)
    OPTION_WORDS_STATE(ipv4_options_1, 1, hdr.ipv4_options, ipv4_l4)
    // Only a first fragment (offset 0) starts with the L4 header.
    state ipv4_l4 {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_TCP): parse_tcp;
            (0, IP_PROTO_UDP): parse_udp;
            (0, IP_PROTO_ICMP): parse_icmp;
            default: accept;
        }
    }
    state ipv4_ihl_invalid {
        pm.malformed = DROP_IPV4_IHL_INVALID;
        transition accept;
    }
    state ip_version_mismatch {
        pm.malformed = DROP_IP_VERSION_MISMATCH;
        transition accept;
    }

    // -- outer (or only) IPv6
    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.version, hdr.ipv6.next_header) {
            (6, IP_PROTO_TCP): parse_tcp;
            (6, IP_PROTO_UDP): parse_udp;
            (6, IP_PROTO_ICMPV6): parse_icmp;
            (6, _): accept;
            default: ip_version_mismatch;
        }
    }

    // -- outer (or only) L4
    state parse_tcp {
        packet.extract(hdr.tcp);
        transition select(hdr.tcp.data_offset) {
            0 .. 4: tcp_data_offset_invalid;
            default: accept;
        }
    }
    state tcp_data_offset_invalid {
        pm.malformed = DROP_TCP_DATA_OFFSET_INVALID;
        transition accept;
    }
    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            UDP_PORT_GENEVE: parse_geneve;
            default: accept;
        }
    }

    // -- Geneve and its options, as many words as the PHV budget allows
    state parse_geneve {
        packet.extract(hdr.geneve);
        transition select(hdr.geneve.opt_len) {
            0: geneve_options_done;
            1: geneve_options_1;
            2: geneve_options_2;
            3: geneve_options_3;
            4: geneve_options_4;
            5: geneve_options_5;
            6: geneve_options_6;
            7: geneve_options_7;
#if TNA_GENEVE_OPTION_WORDS > 7
            8: geneve_options_8;
            9: geneve_options_9;
            10: geneve_options_10;
            11: geneve_options_11;
            12: geneve_options_12;
            13: geneve_options_13;
            14: geneve_options_14;
            15: geneve_options_15;
            16: geneve_options_16;
#endif
            default: too_deep;
        }
    }
#if TNA_GENEVE_OPTION_WORDS > 7
    OPTION_WORDS_STATE(geneve_options_16, 16, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_15, 15, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_14, 14, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_13, 13, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_12, 12, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_11, 11, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_10, 10, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_9, 9, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_8, 8, hdr.geneve_options, geneve_options_done)
#endif
    OPTION_WORDS_STATE(geneve_options_7, 7, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_6, 6, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_5, 5, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_4, 4, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_3, 3, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_2, 2, hdr.geneve_options, geneve_options_done)
    OPTION_WORDS_STATE(geneve_options_1, 1, hdr.geneve_options, geneve_options_done)
    state too_deep {
        pm.depth_exceeded = true;
        transition accept;
    }
    state geneve_options_done {
        transition select(hdr.geneve.protocol_type) {
            ETHERTYPE_TRANSPARENT_BRIDGING: parse_inner_ethernet;
            default: accept;
        }
    }

    // -- the inner frame
    state parse_inner_ethernet {
        packet.extract(hdr.inner_ethernet);
        transition select(hdr.inner_ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_inner_ipv4;
            ETHERTYPE_IPV6: parse_inner_ipv6;
            default: accept;
        }
    }
    state parse_inner_ipv4 {
        packet.extract(hdr.inner_ipv4);
        transition select(hdr.inner_ipv4.version, hdr.inner_ipv4.ihl) {
            (4, 0 .. 4): ipv4_ihl_invalid;
            (4, 5): inner_ipv4_l4;
            (4, 6): inner_ipv4_options_1;
            (4, 7): inner_ipv4_options_2;
            (4, 8): inner_ipv4_options_3;
            (4, 9): inner_ipv4_options_4;
            (4, 10): inner_ipv4_options_5;
            (4, 11): inner_ipv4_options_6;
            (4, 12): inner_ipv4_options_7;
            (4, 13): inner_ipv4_options_8;
            (4, 14): inner_ipv4_options_9;
            (4, 15): inner_ipv4_options_10;
            default: ip_version_mismatch;
        }
    }
    OPTION_WORDS_STATE(inner_ipv4_options_10, 10, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_9, 9, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_8, 8, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_7, 7, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_6, 6, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_5, 5, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_4, 4, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_3, 3, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_2, 2, hdr.inner_ipv4_options, inner_ipv4_l4)
    OPTION_WORDS_STATE(inner_ipv4_options_1, 1, hdr.inner_ipv4_options, inner_ipv4_l4)
    state inner_ipv4_l4 {
        transition select(hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.protocol) {
            (0, IP_PROTO_TCP): parse_inner_tcp;
            (0, IP_PROTO_UDP): parse_inner_udp;
            default: accept;
        }
    }
    state parse_inner_ipv6 {
        packet.extract(hdr.inner_ipv6);
        transition select(hdr.inner_ipv6.version, hdr.inner_ipv6.next_header) {
            (6, IP_PROTO_TCP): parse_inner_tcp;
            (6, IP_PROTO_UDP): parse_inner_udp;
            (6, _): accept;
            default: ip_version_mismatch;
        }
    }
    state parse_inner_tcp {
        packet.extract(hdr.inner_tcp);
        transition select(hdr.inner_tcp.data_offset) {
            0 .. 4: tcp_data_offset_invalid;
            default: accept;
        }
    }
    state parse_inner_udp {
        packet.extract(hdr.inner_udp);
        transition accept;
    }
}

#endif
