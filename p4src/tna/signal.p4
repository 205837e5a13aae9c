// The ICMP signal on Tofino: MtuEnforcement (../include/icmp_signal.p4)
// decides; the ingress mirrors the offending packet to the session of the
// port it came in on; the session truncates the copy; egress turns the copy
// into the ICMP error.
//
// Why it differs from v1model/signal.p4 (a resubmitted pass that quotes 548
// or 1232 bytes): Tofino's deparser computes checksums only over fields in
// the packet header vector, and the PHV cannot hold a 548-byte quote next to
// everything else. So the quote is the start of the offending IP packet
// that the PHV can hold: SIGNAL_QUOTE_BYTES (72 bytes untagged, 68 behind a
// VLAN tag), always its IP header and the first bytes of its L4 header,
// which is what RFC 792 requires and what a host needs to find the socket
// (RFC 1812 and RFC 4443 ask for more where possible). The addresses come
// from the quoted IP header itself, so the mirror carries only what the
// quote lacks: the signal kind and the MTU (4 bytes; Tofino 1's mirror
// header is small).
//
// The controller gives each port P a mirror session SIGNAL_SESSION(P) that
// sends to P and truncates to SIGNAL_TRUNCATE_BYTES.
#ifndef JUMBOGATE_TNA_SIGNAL_P4
#define JUMBOGATE_TNA_SIGNAL_P4

#include "../include/headers.p4"

// What the first byte of every packet entering egress says it is.
const bit<8> PACKET_KIND_BRIDGED = 0;
const bit<8> PACKET_KIND_SIGNAL = 1;

const MirrorType_t MIRROR_TYPE_SIGNAL = 1;
// The session of the port a signal answers on. Tofino 1 numbers sessions
// with 10 bits: 512 + the 9-bit port. Tofino 2 has 8 bits: the port's low 8
// bits, so on a Tofino 2 with more than one pipe two ports share a session
// (not solved yet: a port-to-session table would be).
#if __TARGET_TOFINO__ == 2
#define SIGNAL_SESSION(port) ((MirrorId_t)(port)[7:0])
#else
#define SIGNAL_SESSION(port) (10w512 | (MirrorId_t)(port))
#endif

// Untagged: Ethernet then 72 quoted bytes; tagged: Ethernet, VLAN, 68.
#define SIGNAL_QUOTE_BYTES 72
const bit<32> SIGNAL_TRUNCATE_BYTES = 4 + 14 + SIGNAL_QUOTE_BYTES;

// Ahead of every packet from ingress to egress (a mirrored copy carries
// signal_mirror_h instead).
header bridged_h {
    bit<8> kind;
}

header signal_mirror_h {
    bit<8>        kind;
    bit<6>        pad;
    signal_kind_t signal_kind;
    bit<16>       signal_mtu;
}

// The quote after the quoted IP header: 52 bytes behind IPv4's 20 (48 +
// 4 when untagged), 32 behind IPv6's 40 (28 + 4 when untagged).
header quote_ipv4_rest_t { bit<384> data; }   // 48 bytes
header quote_ipv6_rest_t { bit<224> data; }   // 28 bytes

struct tna_egress_headers_t {
    bridged_h          bridged;
    signal_mirror_h    signal;
    ethernet_t         ethernet;
    vlan_tag_t         vlan;
    ipv4_t             signal_ipv4;
    ipv6_t             signal_ipv6;
    icmp_t             signal_icmp;
    ipv4_t             quote_ipv4;
    ipv6_t             quote_ipv6;
    quote_ipv4_rest_t  quote_ipv4_rest;
    quote_ipv6_rest_t  quote_ipv6_rest;
    option_word_t      quote_untagged_word;
}

struct tna_egress_metadata_t {
    // The ICMPv6 pseudo-header's upper-layer length and next header (RFC
    // 8200 8.1), as fields: Tofino's deparser checksum takes no constants.
    bit<32> signal_upper_len;
    bit<8>  signal_next_header;
    // The signal's IPv4 total length or IPv6 payload length. It depends on
    // the quote's length, which the parser knows from the state it ends
    // in: set there as a constant, no egress table decides it.
    bit<16> signal_ip_len;
}

parser TnaEgressParser(packet_in packet,
                       out tna_egress_headers_t hdr,
                       out tna_egress_metadata_t meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        meta.signal_upper_len = 0;
        meta.signal_next_header = 0;
        meta.signal_ip_len = 0;
        packet.extract(eg_intr_md);
        transition select(packet.lookahead<bit<8>>()) {
            PACKET_KIND_SIGNAL: parse_signal;
            default: parse_bridged;
        }
    }
    // Forwarded packets: egress only counts them, nothing more to read.
    state parse_bridged {
        packet.extract(hdr.bridged);
        transition accept;
    }
    state parse_signal {
        packet.extract(hdr.signal);
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_signal_vlan;
            ETHERTYPE_IPV4: quote_ipv4_untagged;
            default: quote_ipv6_untagged;
        }
    }
    state parse_signal_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: quote_ipv4;
            default: quote_ipv6;
        }
    }
    // Untagged frames have 4 more quoted bytes, at the quote's end.
    state quote_ipv4_untagged {
        meta.signal_ip_len = IPV4_MIN_BYTES + ICMP_BYTES + SIGNAL_QUOTE_BYTES;
        packet.extract(hdr.quote_ipv4);
        packet.extract(hdr.quote_ipv4_rest);
        packet.extract(hdr.quote_untagged_word);
        transition accept;
    }
    state quote_ipv4 {
        meta.signal_ip_len = IPV4_MIN_BYTES + ICMP_BYTES + SIGNAL_QUOTE_BYTES - 4;
        packet.extract(hdr.quote_ipv4);
        packet.extract(hdr.quote_ipv4_rest);
        transition accept;
    }
    state quote_ipv6_untagged {
        meta.signal_ip_len = ICMP_BYTES + SIGNAL_QUOTE_BYTES;
        meta.signal_upper_len = (bit<32>)(ICMP_BYTES + SIGNAL_QUOTE_BYTES);
        meta.signal_next_header = IP_PROTO_ICMPV6;
        packet.extract(hdr.quote_ipv6);
        packet.extract(hdr.quote_ipv6_rest);
        packet.extract(hdr.quote_untagged_word);
        transition accept;
    }
    state quote_ipv6 {
        meta.signal_ip_len = ICMP_BYTES + SIGNAL_QUOTE_BYTES - 4;
        meta.signal_upper_len = (bit<32>)(ICMP_BYTES + SIGNAL_QUOTE_BYTES - 4);
        meta.signal_next_header = IP_PROTO_ICMPV6;
        packet.extract(hdr.quote_ipv6);
        packet.extract(hdr.quote_ipv6_rest);
        transition accept;
    }
}

// Mirrors SignalBuilder of v1model/signal.p4 (same table, same actions).
// Egress shares each stage's 16 tables with ingress, so it builds the
// signal in few: the lengths come from the parser, and each branch below
// is one table.
control SignalBuilder(inout tna_egress_headers_t hdr, inout tna_egress_metadata_t meta) {
    // Written by either action of signal_source.
    ipv4_addr_t source_v4;
    ipv6_addr_t source_v6;

    action set_signal_source(ipv4_addr_t ipv4, ipv6_addr_t ipv6) {
        source_v4 = ipv4;
        source_v6 = ipv6;
    }
    action signal_from_original_destination() {
        source_v4 = hdr.quote_ipv4.dst_addr;
        source_v6 = hdr.quote_ipv6.dst_addr;
    }
    table signal_source {
        key = {}
        actions = { set_signal_source; signal_from_original_destination; }
        default_action = signal_from_original_destination();
        size = 1;
    }

    apply {
        signal_source.apply();
        mac_addr_t original_dst = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = original_dst;
        hdr.signal_icmp.setValid();
        hdr.signal_icmp.checksum = 0;  // computed in the deparser
        hdr.signal_icmp.rest = (bit<32>)hdr.signal.signal_mtu;
        if (hdr.quote_ipv4.isValid()) {
            hdr.signal_icmp.icmp_type = ICMPV4_TYPE_DEST_UNREACHABLE;
            hdr.signal_icmp.code = ICMPV4_CODE_FRAGMENTATION_NEEDED;
            hdr.signal_ipv4.setValid();
            hdr.signal_ipv4.version = 4;
            hdr.signal_ipv4.ihl = 5;
            hdr.signal_ipv4.dscp = 0;
            hdr.signal_ipv4.ecn = 0;
            hdr.signal_ipv4.total_len = meta.signal_ip_len;
            hdr.signal_ipv4.identification = 0;
            hdr.signal_ipv4.flag_reserved = 0;
            hdr.signal_ipv4.flag_dont_fragment = 0;
            hdr.signal_ipv4.flag_more_fragments = 0;
            hdr.signal_ipv4.frag_offset = 0;
            hdr.signal_ipv4.ttl = SIGNAL_TTL;
            hdr.signal_ipv4.protocol = IP_PROTO_ICMP;
            hdr.signal_ipv4.hdr_checksum = 0;
            hdr.signal_ipv4.src_addr = source_v4;
            hdr.signal_ipv4.dst_addr = hdr.quote_ipv4.src_addr;
        } else {
            hdr.signal_icmp.icmp_type = ICMPV6_TYPE_PACKET_TOO_BIG;
            hdr.signal_icmp.code = 0;
            hdr.signal_ipv6.setValid();
            hdr.signal_ipv6.version = 6;
            hdr.signal_ipv6.traffic_class = 0;
            hdr.signal_ipv6.flow_label = 0;
            hdr.signal_ipv6.payload_len = meta.signal_ip_len;
            hdr.signal_ipv6.next_header = IP_PROTO_ICMPV6;
            hdr.signal_ipv6.hop_limit = SIGNAL_TTL;
            hdr.signal_ipv6.src_addr = source_v6;
            hdr.signal_ipv6.dst_addr = hdr.quote_ipv6.src_addr;
        }
    }
}

control TnaEgressDeparser(packet_out packet,
                          inout tna_egress_headers_t hdr,
                          in tna_egress_metadata_t meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() signal_ipv4_checksum;
    Checksum() signal_icmpv4_checksum;
    Checksum() signal_icmpv6_checksum;
    apply {
        if (hdr.signal_ipv4.isValid()) {
            hdr.signal_ipv4.hdr_checksum = signal_ipv4_checksum.update({
                hdr.signal_ipv4.version, hdr.signal_ipv4.ihl,
                hdr.signal_ipv4.dscp, hdr.signal_ipv4.ecn,
                hdr.signal_ipv4.total_len, hdr.signal_ipv4.identification,
                hdr.signal_ipv4.flag_reserved, hdr.signal_ipv4.flag_dont_fragment,
                hdr.signal_ipv4.flag_more_fragments, hdr.signal_ipv4.frag_offset,
                hdr.signal_ipv4.ttl, hdr.signal_ipv4.protocol,
                hdr.signal_ipv4.src_addr, hdr.signal_ipv4.dst_addr });
            hdr.signal_icmp.checksum = signal_icmpv4_checksum.update({
                hdr.signal_icmp.icmp_type, hdr.signal_icmp.code, hdr.signal_icmp.rest,
                hdr.quote_ipv4, hdr.quote_ipv4_rest.data,
                hdr.quote_untagged_word.data });
        }
        if (hdr.signal_ipv6.isValid()) {
            // ICMPv6 checksums include the IPv6 pseudo-header (RFC 8200 8.1).
            hdr.signal_icmp.checksum = signal_icmpv6_checksum.update({
                hdr.signal_ipv6.src_addr, hdr.signal_ipv6.dst_addr,
                meta.signal_upper_len, 24w0, meta.signal_next_header,
                hdr.signal_icmp.icmp_type, hdr.signal_icmp.code, hdr.signal_icmp.rest,
                hdr.quote_ipv6, hdr.quote_ipv6_rest.data,
                hdr.quote_untagged_word.data });
        }
        // The bridged byte and the mirror header end here; the frame leaves
        // as Ethernet [VLAN] [signal IP, ICMP] and the rest.
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.signal_ipv4);
        packet.emit(hdr.signal_ipv6);
        packet.emit(hdr.signal_icmp);
        packet.emit(hdr.quote_ipv4);
        packet.emit(hdr.quote_ipv6);
        packet.emit(hdr.quote_ipv4_rest);
        packet.emit(hdr.quote_ipv6_rest);
        packet.emit(hdr.quote_untagged_word);
    }
}

#endif
