// Routing on the outer destination address, ECMP over next hops, and the
// TTL / hop-limit decrement.
//
// Two stages: an LPM route gives a next-hop group id; the next_hops table,
// keyed by that id, is backed by an action selector whose members each name
// one next hop (port and MAC rewrite). The selector hashes meta.flow (the
// inner 5-tuple for Geneve), never the port or the packet size, so a flow
// keeps its member when it comes back from the SmartNIC merged or split.
// A weighted group lists a next hop several times under different member ids.
#ifndef JUMBOGATE_ROUTING_P4
#define JUMBOGATE_ROUTING_P4

#include "headers.p4"

control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout port_t egress_port,
                in bool forward) {

    action set_next_hop_group(bit<16> group_id) {
        meta.next_hop_group = group_id;
        meta.routed = true;
    }
    action no_route() {
        meta.routed = false;
    }

    TOFINO_STAGE(6)
    table routes_v4 {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { set_next_hop_group; @defaultonly no_route; }
        const default_action = no_route();
        size = 4096;
    }
    TOFINO_STAGE(6)
    table routes_v6 {
        key = { hdr.ipv6.dst_addr: lpm @name("dst_addr"); }
        actions = { set_next_hop_group; @defaultonly no_route; }
        const default_action = no_route();
        size = 4096;
    }

    action set_next_hop(port_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
    }
    // CRC16 over the selector key fields below (target.p4 says how).
    ECMP_SELECTOR(ecmp_selector, 1024);

    table next_hops {
        key = {
            meta.next_hop_group: exact @name("group_id");
            meta.flow.src_addr: selector;
            meta.flow.dst_addr: selector;
            meta.flow.protocol: selector;
            meta.flow.src_port: selector;
            meta.flow.dst_port: selector;
        }
        actions = { set_next_hop; }
        implementation = ecmp_selector;
        size = 1024;
    }

    // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), where m is the 16-bit word
    // holding TTL and protocol. Incremental, so IPv4 options never need to be
    // part of a checksum computation.
    action decrement_ipv4_ttl() {
#ifdef TARGET_TNA
        // A Tofino action gives each field one ALU operation, too few to
        // fold the checksum's carries here: the TNA deparser recomputes
        // the IPv4 checksum instead (tna/jumbogate.p4).
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
#else
        bit<16> old_word = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        bit<16> new_word = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        bit<32> sum = (bit<32>)(~hdr.ipv4.hdr_checksum) + (bit<32>)(~old_word)
                      + (bit<32>)new_word;
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        hdr.ipv4.hdr_checksum = ~(sum[15:0]);
#endif
    }

    // forward: the packet is neither dropped nor steered, so it is routed
    // here or dropped with a reason. The route lookups key on the headers
    // alone and run for every IP packet, so that on Tofino they sit in the
    // first stages; the next hop, which rewrites the packet, only for one
    // that is forwarded.
    apply {
        if (hdr.ipv4.isValid()) {
            routes_v4.apply();
        } else if (hdr.ipv6.isValid()) {
            routes_v6.apply();
        } else {
            meta.routed = false;
        }
        if (!forward) {
            // Dropped or steered.
        } else if (hdr.ipv4.isValid() && (hdr.ipv4.ttl == 0 || hdr.ipv4.ttl == 1)) {
            meta.drop_reason = DROP_TTL_EXPIRED;
        } else if (hdr.ipv6.isValid() && (hdr.ipv6.hop_limit == 0 || hdr.ipv6.hop_limit == 1)) {
            meta.drop_reason = DROP_HOP_LIMIT_EXPIRED;
        } else if (!meta.routed) {
            meta.drop_reason = DROP_NO_ROUTE;
        } else if (!next_hops.apply().hit) {
            // A table with an action selector has no default action on
            // BMv2: a group id without an entry is a miss.
            meta.drop_reason = DROP_NO_ROUTE;
        } else if (hdr.ipv4.isValid()) {
            decrement_ipv4_ttl();
        } else {
            hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
        }
    }
}

#endif
