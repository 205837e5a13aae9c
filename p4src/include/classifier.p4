// First ingress stage: the role of the ingress port, the parser's verdict
// as a drop reason, and the flow 5-tuple every later stage keys on.
#ifndef JUMBOGATE_CLASSIFIER_P4
#define JUMBOGATE_CLASSIFIER_P4

#include "headers.p4"

// Written by the controller: one entry per port it uses.
control PortRoles(in port_t ingress_port, inout local_metadata_t meta) {
    action set_port_role(port_role_t role) {
        meta.port_role = role;
    }
    action port_role_unassigned() {
        meta.port_role = PORT_ROLE_UNASSIGNED;
    }
    table port_roles {
        key = { ingress_port: exact @name("ingress_port"); }
        actions = { set_port_role; @defaultonly port_role_unassigned; }
        const default_action = port_role_unassigned();
        size = 512;
    }
    apply {
        port_roles.apply();
    }
}

// Turns what the parser found into a drop reason. `packet_too_short` is the
// architecture's "a header ran past the end of the packet" error.
control ParseVerdict(in headers_t hdr,
                     inout local_metadata_t meta,
                     in bool parser_failed,
                     in bool packet_too_short,
                     in bit<32> frame_bytes) {
    // Choices are if statements, never `?:` or a comparison assigned to a
    // bool: a Tofino action only moves or adds, so a condition must be a
    // gateway of its own (the same holds in every shared control).
    apply {
        bit<32> l2_bytes = 14;
        if (hdr.vlan.isValid()) {
            l2_bytes = 18;
        }
        if (packet_too_short) {
            if (meta.parsing.in_geneve_options) {
                meta.drop_reason = DROP_GENEVE_OPTIONS_PAST_PACKET;
            } else {
                meta.drop_reason = DROP_TRUNCATED;
            }
        } else if (parser_failed) {
            meta.drop_reason = DROP_PARSER_ERROR;
        } else if (meta.parsing.malformed != DROP_NONE) {
            meta.drop_reason = meta.parsing.malformed;
        } else if (FRAME_LENGTH_IN_INGRESS && hdr.ipv4.isValid()
                   && l2_bytes + (bit<32>)hdr.ipv4.total_len > frame_bytes) {
            meta.drop_reason = DROP_IP_LENGTH_PAST_FRAME;
        } else if (FRAME_LENGTH_IN_INGRESS && hdr.ipv6.isValid()
                   && l2_bytes + (bit<32>)IPV6_BYTES + (bit<32>)hdr.ipv6.payload_len > frame_bytes) {
            meta.drop_reason = DROP_IP_LENGTH_PAST_FRAME;
        } else if (!hdr.ipv4.isValid() && !hdr.ipv6.isValid()
                   && !meta.parsing.depth_exceeded) {
            meta.drop_reason = DROP_NOT_IP;
        }
    }
}

// Fills meta.flow from the innermost complete L3/L4 headers: the inner ones
// for Geneve when they were parsed, otherwise the outer ones. A packet too
// deep to parse fully therefore still hashes on what was parsed (for Geneve,
// the outer UDP source port, where the encapsulator put its flow entropy).
// One action per header it reads, the header named in the action, not
// passed to it: an action's header parameter is a copy of the whole header,
// which ties every field of both copies together in Tofino's PHV allocation.
#define FROM_IPV4(name, ip) action name() { \
        meta.flow.ip_version = 4; \
        meta.flow.src_addr = (flow_addr_t)ip.src_addr; \
        meta.flow.dst_addr = (flow_addr_t)ip.dst_addr; \
        meta.flow.src_v4 = ip.src_addr; \
        meta.flow.dst_v4 = ip.dst_addr; \
        meta.flow.protocol = ip.protocol; \
        meta.flow.ip_len = ip.total_len; \
        meta.flow.dont_fragment = ip.flag_dont_fragment; \
    }
#define FROM_IPV6(name, ip) action name() { \
        meta.flow.ip_version = 6; \
        meta.flow.src_addr = ip.src_addr; \
        meta.flow.dst_addr = ip.dst_addr; \
        meta.flow.protocol = ip.next_header; \
        meta.flow.ip_len = ip.payload_len + IPV6_BYTES; \
        meta.flow.dont_fragment = 1;  /* IPv6 routers never fragment */ \
    }
#define FROM_TCP(name, tcp) action name() { \
        meta.flow.src_port = tcp.src_port; \
        meta.flow.dst_port = tcp.dst_port; \
        meta.flow.tcp_flags = tcp.flags; \
        meta.flow.is_tcp = 1; \
    }
#define FROM_UDP(name, udp) action name() { \
        meta.flow.src_port = udp.src_port; \
        meta.flow.dst_port = udp.dst_port; \
        meta.flow.is_udp = 1; \
    }

control FlowClassifier(in headers_t hdr, inout local_metadata_t meta) {
    FROM_IPV4(from_ipv4, hdr.ipv4)
    FROM_IPV4(from_inner_ipv4, hdr.inner_ipv4)
    FROM_IPV6(from_ipv6, hdr.ipv6)
    FROM_IPV6(from_inner_ipv6, hdr.inner_ipv6)
    FROM_TCP(from_tcp, hdr.tcp)
    FROM_TCP(from_inner_tcp, hdr.inner_tcp)
    FROM_UDP(from_udp, hdr.udp)
    FROM_UDP(from_inner_udp, hdr.inner_udp)

    // Whether an ICMP error may be sent about the packet (RFC 1812
    // 4.3.2.7): not about an ICMP error (IPv4 types 3, 4, 5, 11 and 12;
    // ICMPv6 types below 128), nor to 0.0.0.0, 224.0.0.0/3 (multicast,
    // reserved, broadcast), :: or ff00::/8 (multicast), nor without IP.
    // One constant table, the first entry that matches deciding: as tests
    // on the fields, 16 gateways and tables on Tofino, a few stages' worth
    // of a budget of 16 per stage.
    @hidden action allow_signal() {
        meta.flow.signal_allowed = true;
    }
    @hidden action refuse_signal() {
        meta.flow.signal_allowed = false;
    }
    @hidden table signal_policy {
        key = {
            // As bits: BMv2 takes no boolean in a ternary entry.
            (bit<1>)hdr.icmp.isValid(): ternary @name("icmp_valid");
            (bit<1>)hdr.ipv4.isValid(): ternary @name("ipv4_valid");  // hdr.icmp holds ICMPv6 too
            hdr.icmp.icmp_type: ternary;
            meta.flow.ip_version: ternary;
            meta.flow.src_addr: ternary;  // IPv4 in its low 32 bits
        }
        actions = { allow_signal; refuse_signal; }
        const entries = {
            (1, 1, 3, _, _): refuse_signal();
            (1, 1, 4, _, _): refuse_signal();
            (1, 1, 5, _, _): refuse_signal();
            (1, 1, 11, _, _): refuse_signal();
            (1, 1, 12, _, _): refuse_signal();
            (1, 0, 0 &&& 0x80, _, _): refuse_signal();
            (_, _, _, 4, 0 &&& 0xffffffff): refuse_signal();
            (_, _, _, 4, 0xe0000000 &&& 0xe0000000): refuse_signal();
            (_, _, _, 6, 0): refuse_signal();
            (_, _, _, 6, 0xff000000000000000000000000000000 &&& 0xff000000000000000000000000000000):
                refuse_signal();
            (_, _, _, 4, _): allow_signal();
            (_, _, _, 6, _): allow_signal();
        }
        const default_action = refuse_signal();
    }

    // Which IP header the flow is read from: the inner one when there is
    // one, IPv4 before IPv6. Every combination of the four that names a
    // header is listed, so this is the chain of if statements it replaces
    // (four tables and their gateways on Tofino, in the first stage, which
    // holds 16). Exact, not ternary: BMv2 takes no boolean in a ternary
    // entry.
    @hidden table network_header {
        key = {
            hdr.inner_ipv4.isValid(): exact @name("inner_ipv4_valid");
            hdr.inner_ipv6.isValid(): exact @name("inner_ipv6_valid");
            hdr.ipv4.isValid(): exact @name("ipv4_valid");
            hdr.ipv6.isValid(): exact @name("ipv6_valid");
        }
        actions = { from_inner_ipv4; from_inner_ipv6; from_ipv4; from_ipv6; NoAction; }
        const entries = {
            (true, false, false, false): from_inner_ipv4();
            (true, false, false, true): from_inner_ipv4();
            (true, false, true, false): from_inner_ipv4();
            (true, false, true, true): from_inner_ipv4();
            (true, true, false, false): from_inner_ipv4();
            (true, true, false, true): from_inner_ipv4();
            (true, true, true, false): from_inner_ipv4();
            (true, true, true, true): from_inner_ipv4();
            (false, true, false, false): from_inner_ipv6();
            (false, true, false, true): from_inner_ipv6();
            (false, true, true, false): from_inner_ipv6();
            (false, true, true, true): from_inner_ipv6();
            (false, false, true, false): from_ipv4();
            (false, false, true, true): from_ipv4();
            (false, false, false, true): from_ipv6();
        }
        const default_action = NoAction();
    }

    // Which TCP or UDP header the flow's ports come from: the inner one
    // when there is an inner IP header (none if it carries neither), the
    // outer one otherwise, TCP before UDP. Listed the same way as
    // network_header: every combination of the six that names a header.
    @hidden table transport_header {
        key = {
            hdr.inner_ipv4.isValid(): exact @name("inner_ipv4_valid");
            hdr.inner_ipv6.isValid(): exact @name("inner_ipv6_valid");
            hdr.inner_tcp.isValid(): exact @name("inner_tcp_valid");
            hdr.inner_udp.isValid(): exact @name("inner_udp_valid");
            hdr.tcp.isValid(): exact @name("tcp_valid");
            hdr.udp.isValid(): exact @name("udp_valid");
        }
        actions = { from_inner_tcp; from_inner_udp; from_tcp; from_udp; NoAction; }
        const entries = {
            (true,  true,  true,  true,  true,  true): from_inner_tcp();
            (true,  true,  true,  true,  true,  false): from_inner_tcp();
            (true,  true,  true,  true,  false, true): from_inner_tcp();
            (true,  true,  true,  true,  false, false): from_inner_tcp();
            (true,  true,  true,  false, true,  true): from_inner_tcp();
            (true,  true,  true,  false, true,  false): from_inner_tcp();
            (true,  true,  true,  false, false, true): from_inner_tcp();
            (true,  true,  true,  false, false, false): from_inner_tcp();
            (true,  true,  false, true,  true,  true): from_inner_udp();
            (true,  true,  false, true,  true,  false): from_inner_udp();
            (true,  true,  false, true,  false, true): from_inner_udp();
            (true,  true,  false, true,  false, false): from_inner_udp();
            (true,  false, true,  true,  true,  true): from_inner_tcp();
            (true,  false, true,  true,  true,  false): from_inner_tcp();
            (true,  false, true,  true,  false, true): from_inner_tcp();
            (true,  false, true,  true,  false, false): from_inner_tcp();
            (true,  false, true,  false, true,  true): from_inner_tcp();
            (true,  false, true,  false, true,  false): from_inner_tcp();
            (true,  false, true,  false, false, true): from_inner_tcp();
            (true,  false, true,  false, false, false): from_inner_tcp();
            (true,  false, false, true,  true,  true): from_inner_udp();
            (true,  false, false, true,  true,  false): from_inner_udp();
            (true,  false, false, true,  false, true): from_inner_udp();
            (true,  false, false, true,  false, false): from_inner_udp();
            (false, true,  true,  true,  true,  true): from_inner_tcp();
            (false, true,  true,  true,  true,  false): from_inner_tcp();
            (false, true,  true,  true,  false, true): from_inner_tcp();
            (false, true,  true,  true,  false, false): from_inner_tcp();
            (false, true,  true,  false, true,  true): from_inner_tcp();
            (false, true,  true,  false, true,  false): from_inner_tcp();
            (false, true,  true,  false, false, true): from_inner_tcp();
            (false, true,  true,  false, false, false): from_inner_tcp();
            (false, true,  false, true,  true,  true): from_inner_udp();
            (false, true,  false, true,  true,  false): from_inner_udp();
            (false, true,  false, true,  false, true): from_inner_udp();
            (false, true,  false, true,  false, false): from_inner_udp();
            (false, false, true,  true,  true,  true): from_tcp();
            (false, false, true,  true,  true,  false): from_tcp();
            (false, false, true,  true,  false, true): from_udp();
            (false, false, true,  false, true,  true): from_tcp();
            (false, false, true,  false, true,  false): from_tcp();
            (false, false, true,  false, false, true): from_udp();
            (false, false, false, true,  true,  true): from_tcp();
            (false, false, false, true,  true,  false): from_tcp();
            (false, false, false, true,  false, true): from_udp();
            (false, false, false, false, true,  true): from_tcp();
            (false, false, false, false, true,  false): from_tcp();
            (false, false, false, false, false, true): from_udp();
        }
        const default_action = NoAction();
    }

    apply {
        meta.flow.is_tcp = 0;
        meta.flow.is_udp = 0;
        meta.flow.later_fragment = false;
        meta.flow.dont_fragment = 0;
        meta.is_geneve = false;
        if (hdr.geneve.isValid()) {
            meta.is_geneve = true;
        }
        network_header.apply();
        signal_policy.apply();
        transport_header.apply();
        if (!hdr.inner_ipv4.isValid() && !hdr.inner_ipv6.isValid()
                && !hdr.tcp.isValid() && !hdr.udp.isValid()
                && hdr.ipv4.isValid() && hdr.ipv4.frag_offset != 0) {
            meta.flow.later_fragment = true;
        }
    }
}

// What to do with a packet whose headers did not fit PARSE_DEPTH_BYTES.
// Written by the controller (default: drop). Forwarded packets are routed on
// their outer headers and never reach the jumbo policy or the merge path.
control DepthPolicy(inout local_metadata_t meta) {
    action drop_too_deep() {
        meta.drop_reason = DROP_PARSE_DEPTH_EXCEEDED;
    }
    action forward_too_deep() {
        meta.forward_on_outer = true;
    }
    table depth_policy {
        key = {}
        actions = { drop_too_deep; forward_too_deep; }
        default_action = drop_too_deep();
        size = 1;
    }
    apply {
        depth_policy.apply();
    }
}

#endif
