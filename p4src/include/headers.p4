// Header and metadata types shared by every jumbogate top level. Where a
// field's type depends on what the target's parser can do (options, the ICMP
// quote), headers_t names it through a macro of the target's target.p4.
#ifndef JUMBOGATE_HEADERS_P4
#define JUMBOGATE_HEADERS_P4

#include "defines.p4"
#include "drop_reasons.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header vlan_tag_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<1>      flag_reserved;
    bit<1>      flag_dont_fragment;
    bit<1>      flag_more_fragments;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// IPv4 options: up to 40 bytes. The router never needs their contents; they
// are carried so that they are re-emitted intact. (The TTL checksum update is
// incremental, so options never enter a checksum computation.)
header ipv4_options_t {
    varbit<320> data;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_header;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  reserved;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header tcp_options_t {
    varbit<320> data;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// ICMP and ICMPv6 share this layout. `rest` is the 32-bit field after the
// checksum: for "fragmentation needed" 16 unused bits and the next-hop MTU,
// for "packet too big" the 32-bit MTU.
header icmp_t {
    bit<8>  icmp_type;
    bit<8>  code;
    bit<16> checksum;
    bit<32> rest;
}

header geneve_t {
    bit<2>  version;
    bit<6>  opt_len;      // options length in 4-byte words
    bit<1>  oam;
    bit<1>  critical;
    bit<6>  reserved;
    bit<16> protocol_type;
    bit<24> vni;
    bit<8>  reserved2;
}

// Geneve options are walked one 4-byte word at a time (see parser.p4); the
// words are kept so that forwarded packets keep their options. Targets
// without varbit (TNA) read IPv4 and TCP options as such words too.
header option_word_t {
    bit<32> data;
}

// The start of an offending IP packet, quoted in an ICMP error. Parsed as
// one opaque header only on the signal pass (see icmp_signal.p4) so that the
// ICMP checksum covers exactly the quoted bytes. p4c caps a field at 2048
// bits, so the quote is cut into 2048-bit pieces.
header icmpv4_quote_t {   // 548 bytes
    bit<2048> part0;
    bit<2048> part1;
    bit<288>  part2;
}

header icmpv6_quote_t {   // 1232 bytes
    bit<2048> part0;
    bit<2048> part1;
    bit<2048> part2;
    bit<2048> part3;
    bit<1664> part4;
}

struct headers_t {
    ethernet_t      ethernet;
    vlan_tag_t      vlan;
    // Headers of a generated ICMP error, emitted before the quote, where
    // the target builds it from this header set (v1model).
    SIGNAL_HEADER_FIELDS
    // Outer (or only) L3/L4.
    ipv4_t          ipv4;
    IPV4_OPTIONS_FIELD(ipv4_options);
    ipv6_t          ipv6;
    tcp_t           tcp;
    TCP_OPTIONS_FIELD(tcp_options)
    udp_t           udp;
    icmp_t          icmp;
    // Rack underlay: outer IPv6 / UDP 6081 / Geneve / inner frame.
    geneve_t        geneve;
    option_word_t[GENEVE_OPTION_STACK_WORDS] geneve_options;
    ethernet_t      inner_ethernet;
    ipv4_t          inner_ipv4;
    IPV4_OPTIONS_FIELD(inner_ipv4_options);
    ipv6_t          inner_ipv6;
    tcp_t           inner_tcp;
    TCP_OPTIONS_FIELD(inner_tcp_options)
    udp_t           inner_udp;
}

// The 5-tuple that identifies a flow: the inner one for Geneve traffic (the
// encapsulator already folded it into the outer UDP source port, so hashing
// either gives the same spread), the only one otherwise.
struct flow_t {
    bit<4>      ip_version;  // 4 or 6; 0 when there is no IP header
    flow_addr_t src_addr;
    flow_addr_t dst_addr;
    ipv4_addr_t src_v4;      // the same addresses at their own width, for
    ipv4_addr_t dst_v4;      // the IPv4 tables
    bit<8>      protocol;
    bit<16>     src_port;
    bit<16>     dst_port;
    bit<16>     ip_len;      // whole IP packet, header included
    flag_t      dont_fragment;  // DF for IPv4; always 1 for IPv6
    bit<8>      tcp_flags;
    flag_t      is_tcp;
    flag_t      is_udp;
    // An IPv4 fragment other than the first: it shows no L4 header.
    bool        later_fragment;
    // An ICMP error may be sent about this packet: it is not itself an ICMP
    // error, and its source is one host (not unspecified, multicast or
    // broadcast). RFC 1812 4.3.2.7; otherwise a signal could answer a
    // signal, or reach a whole group.
    bool        signal_allowed;
}

// What the parser learned beyond the headers themselves.
struct parser_metadata_t {
    bit<16>        depth;           // bytes consumed so far
    bool           depth_exceeded;  // a header did not fit PARSE_DEPTH_BYTES
    drop_reason_t  malformed;       // a malformed field found by the parser
    bool           in_geneve_options;  // where a PacketTooShort happened
    bit<16>        next;            // what the last header says comes next
}

// Digest sent to the controller when a flow crosses the elephant threshold.
struct elephant_digest_t {
    bit<4>      ip_version;
    flow_addr_t src_addr;
    flow_addr_t dst_addr;
    bit<8>      protocol;
    bit<16>     src_port;
    bit<16>     dst_port;
    bit<32>     estimated_bytes;
}

// Differences that a condition then tests against zero: a Tofino gateway
// compares one field (at most 44 bits) with a constant, never two fields
// or an expression. Each difference is taken by a hidden one-action table
// (DIFFERENCE_STEP in defines.p4) so that no compiler pass folds it back
// into the condition; over_limit is chosen from such differences.
struct comparisons_t {
    // JumboPolicy's, for MtuEnforcement, Steering and the elephant sketch.
    bit<16> over_path;      // IP length |-| path MTU
    // 0 when the packet fits every MTU that holds for it; if not, and it is
    // held to them, MtuEnforcement drops it, with or without a signal.
    // Tested as it is, never through a flag made of it: on Tofino that
    // would cost a stage before Steering and the elephant sketch.
    bit<16> over_limit;
}

struct local_metadata_t {
    parser_metadata_t parsing;
    comparisons_t     cmp;
    // Preserved across the resubmit that turns an oversized packet into its
    // ICMP signal (FIELD_LIST_ICMP_SIGNAL). Top-level fields: p4c only looks
    // for @field_list on the metadata struct's own fields.
    @field_list(1)
    signal_kind_t     signal_kind;
    @field_list(1)
    port_t            signal_reply_port;
    @field_list(1)
    bit<16>           signal_mtu;
    @field_list(1)
    flow_addr_t       signal_reply_to;    // the offending packet's source
    @field_list(1)
    flow_addr_t       signal_reply_from;  // and its destination
    // The ICMPv6 pseudo-header's 32-bit upper-layer length (the checksum
    // field list cannot hold a cast).
    bit<32>           signal_upper_len;
    flow_t            flow;
    port_role_t       port_role;
    drop_reason_t     drop_reason;
    bool              is_geneve;
    // Set by the depth policy: route on the outer headers only.
    bool              forward_on_outer;
    // Jumbo policy.
    bit<1>            fleet_jumbo;
    flag_t            instance_known;
    bit<16>           instance_mtu;
    bit<16>           path_mtu;
    // Steering. JumboPolicy's: TCP or UDP to or from an instance whose
    // effective MTU is the guest jumbo MTU, which the SmartNIC may merge
    // (TCP) or pack into caravans (UDP).
    flag_t            merge_eligible;
    steer_reason_t    steer_reason;
    // Steering's: a merge-eligible packet it could have steered and left on
    // the bypass, which the elephant sketch counts.
    bool              elephant_candidate;
    port_t            nic_port;
    flag_t            nic_port_set;
    // Routing.
    bit<16>           next_hop_group;
    bool              routed;
    // Elephant detection: the controller's threshold, and the estimate a
    // report's digest carries (each target raises and sends reports its own
    // way: elephant_report_t).
    bit<32>           elephant_threshold;
    bit<32>           elephant_estimate;
}

#endif
