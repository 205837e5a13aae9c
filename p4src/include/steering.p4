// Steering: which packets go to the SmartNIC (the merge path) and which are
// routed straight (the bypass).
//
// To the NIC, only from external or internal ports:
//  * outbound (internal port) TCP packets longer than their route's path
//    MTU, to be split;
//  * merge-eligible TCP packets (TCP to or from a jumbo instance, decided
//    by JumboPolicy) that
//      - are in merge_flows (5-tuple, installed by the controller with an
//        idle timeout), or
//      - arrive from outside and match an opt-in merge_services rule
//        (destination prefix + TCP port range), or
//      - are handshake packets (SYN or SYN-ACK), so the NIC learns each
//        side's MSS;
//  * merge-eligible UDP packets from outside (toward a jumbo instance) in
//    merge_flows, not in Geneve, for the SmartNIC to pack into caravans.
//    Only an operator lists a UDP flow: a caravan reaches only a receiver
//    that unpacks it, so UDP is never an elephant candidate. Geneve's is
//    never steered as UDP: merge_flows matches its inner flow, and a
//    caravan of tunnel packets is one no tunnel endpoint unpacks.
// Packets that come back on the NIC port never get here: they are routed.
#ifndef JUMBOGATE_STEERING_P4
#define JUMBOGATE_STEERING_P4

#include <core.p4>
#include "headers.p4"

// Which port the SmartNIC sits on. One entry, written by the controller;
// until it is written nothing is steered.
control NicPort(inout local_metadata_t meta) {
    action set_nic_port(port_t port) {
        meta.nic_port = port;
        meta.nic_port_set = 1;
    }
    action no_nic_port() {
        meta.nic_port_set = 0;
    }
    table nic_port {
        key = {}
        actions = { set_nic_port; no_nic_port; }
        default_action = no_nic_port();
        size = 1;
    }
    apply {
        nic_port.apply();
    }
}

// Path MTU discovery between borders (docs/pathmtu.md). From outside,
// probes and replies (UDP to PMTU_PROBE_PORT) and later IPv4 fragments
// (which may be a probe's, and show no port) go to the SmartNIC, which
// answers, takes or returns them. From the SmartNIC, its own probes and
// replies (UDP between two PMTU_PROBE_PORTs) are routed as they are. Both
// skip the MTU policy: a probe tests the path, it is not for the instance
// it is addressed to, and may be larger than that instance's MTU or than
// the path MTU the switch believes in. Applied to a packet the MTU policy
// would hold, it sets held_to_mtu unless the packet is a probe: itself,
// not through a flag the caller then tests, which on Tofino is a stage
// more before every decision that reads it.
control PathProbes(inout local_metadata_t meta, inout flag_t held_to_mtu) {
    // Without a SmartNIC to send them to, no probe is special. One chain of
    // exclusive branches, each writing what it decides: a default
    // overwritten later would take a stage more on Tofino.
    apply {
        if (meta.nic_port_set == 1 && meta.port_role == PORT_ROLE_EXTERNAL
                && (meta.flow.later_fragment
                    || (meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT))) {
            meta.steer_reason = STEER_PATH_PROBE;
        } else if (meta.nic_port_set == 1 && meta.port_role == PORT_ROLE_NIC
                && meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT
                && meta.flow.src_port == PMTU_PROBE_PORT) {
            // The SmartNIC's own probe or reply: routed as it is.
        } else {
            held_to_mtu = 1;
        }
    }
}

// Applied to every packet: its two lookups key on the flow alone, so on
// Tofino they run in the first stages, side by side with the jumbo policy.
// Only a packet held to its MTU (held_to_mtu: fully parsed, no path probe)
// that fits it and came from outside or from the rack may be steered:
// packets back from the SmartNIC (or the CPU) are never steered again.
// Steering also marks what the elephant sketch counts: a merge-eligible
// packet it could have steered and left on the bypass
// (meta.elephant_candidate).
control Steering(inout local_metadata_t meta, in flag_t held_to_mtu) {
    // Whether the lookups hit, set by the entries' actions; what they
    // stand for is decided below. (Not `.apply().hit`: on Tofino each
    // branch on a hit is a table of its own, and every stage holds 16.)
    flag_t listed_flow;
    flag_t listed_service;

    action steer_merge_flow() {
        listed_flow = 1;
    }
    TOFINO_STAGE(3)
    table merge_flows {
        key = {
            meta.flow.ip_version: exact @name("ip_version");
            meta.flow.src_addr: exact @name("src_addr");
            meta.flow.dst_addr: exact @name("dst_addr");
            meta.flow.protocol: exact @name("protocol");
            meta.flow.src_port: exact @name("src_port");
            meta.flow.dst_port: exact @name("dst_port");
        }
        actions = { steer_merge_flow; @defaultonly NoAction; }
        const default_action = NoAction();
        IDLE_TIMEOUT;
        size = 16384;
    }

    action steer_merge_service() {
        listed_service = 1;
    }
    TOFINO_STAGE(3)
    table merge_services {
        key = {
            meta.flow.ip_version: exact @name("ip_version");
            meta.flow.dst_addr: ternary @name("dst_addr");
            meta.flow.dst_port: range @name("dst_port");
        }
        actions = { steer_merge_service; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 1024;
    }

    @hidden action steer(steer_reason_t reason) {
        meta.steer_reason = reason;
        meta.elephant_candidate = false;
    }
    @hidden action leave_on_bypass() {
        meta.elephant_candidate = true;
    }
    @hidden action route() {
        meta.elephant_candidate = false;
    }
    // The decision, as one constant table, the first entry that matches
    // deciding (as if statements, about ten gateways and tables on Tofino,
    // where a stage holds 16). In words, for a packet held to its MTU
    // (which makes its role external, internal or the SmartNIC's) that fits
    // it (over_limit 0), not back from the SmartNIC, with a SmartNIC to
    // steer to, and TCP (1, 2) or UDP (3):
    //  1. outbound over its path MTU (over_path, as JumboPolicy measured
    //     it): to the SmartNIC to be split;
    //  2. merge-eligible (JumboPolicy: to or from a jumbo instance) and
    //     in merge_flows, or from outside and in merge_services, or a
    //     handshake packet (SYN or SYN-ACK, so the SmartNIC learns each
    //     side's MSS): to the SmartNIC to be merged;
    //  3. UDP (merge-eligible and not TCP) from outside, in merge_flows
    //     (which is not looked up for UDP in Geneve): to the SmartNIC to be
    //     packed into caravans;
    //  4. otherwise routed; an elephant candidate if merge-eligible TCP and
    //     from outside, also when no SmartNIC is set. An instance's own
    //     outbound flows never are: the controller merges only flows toward
    //     an instance, so their digests (an instance's ACKs to a fast
    //     download, once an epoch) would be work for nobody.
    @hidden table decision {
        key = {
            held_to_mtu: ternary @name("held_to_mtu");
            meta.cmp.over_limit: ternary @name("over_limit");
            meta.port_role: ternary @name("port_role");
            meta.nic_port_set: ternary @name("nic_port_set");
            meta.flow.is_tcp: ternary @name("is_tcp");
            meta.cmp.over_path: ternary @name("over_path");
            meta.merge_eligible: ternary @name("merge_eligible");
            listed_flow: ternary @name("listed_flow");
            listed_service: ternary @name("listed_service");
            meta.flow.tcp_flags: ternary @name("tcp_flags");
        }
        actions = { steer; leave_on_bypass; route; }
        const entries = {
            (1, 0, PORT_ROLE_EXTERNAL, 1, 1, _, 1, 1, _, _): steer(STEER_MERGE_FLOW);
            (1, 0, PORT_ROLE_EXTERNAL, 1, 1, _, 1, _, 1, _): steer(STEER_MERGE_SERVICE);
            (1, 0, PORT_ROLE_EXTERNAL, 1, 1, _, 1, _, _, TCP_FLAG_SYN &&& TCP_FLAG_SYN):
                steer(STEER_HANDSHAKE);
            (1, 0, PORT_ROLE_EXTERNAL, 1, 0, _, 1, 1, _, _): steer(STEER_MERGE_FLOW);
            (1, 0, PORT_ROLE_EXTERNAL, _, 1, _, 1, _, _, _): leave_on_bypass();
            // From the rack, merge_services does not apply (listed_service
            // is never set).
            (1, 0, PORT_ROLE_INTERNAL, 1, 1, 0, 1, 1, _, _): steer(STEER_MERGE_FLOW);
            (1, 0, PORT_ROLE_INTERNAL, 1, 1, 0, 1, _, _, TCP_FLAG_SYN &&& TCP_FLAG_SYN):
                steer(STEER_HANDSHAKE);
            (1, 0, PORT_ROLE_INTERNAL, 1, 1, 0, _, _, _, _): route();
            (1, 0, PORT_ROLE_INTERNAL, 1, 1, _, _, _, _, _): steer(STEER_OUTBOUND_SPLIT);
        }
        const default_action = route();
    }

    apply {
        listed_flow = 0;
        listed_service = 0;
        if (meta.flow.is_tcp == 1 || (meta.flow.is_udp == 1 && !meta.is_geneve)) {
            merge_flows.apply();
        }
        if (meta.flow.is_tcp == 1 && meta.port_role == PORT_ROLE_EXTERNAL) {
            merge_services.apply();
        }
        decision.apply();
    }
}

#endif
