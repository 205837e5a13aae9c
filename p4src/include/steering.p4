// Steering: which packets go to the SmartNIC (the merge path) and which are
// routed straight (the bypass).
//
// To the NIC, only from external or internal ports, only TCP:
//  * outbound (internal port) packets longer than their route's path MTU,
//    to be split;
//  * merge-eligible packets (TCP to or from a jumbo instance, decided by
//    JumboPolicy) that
//      - are in merge_flows (5-tuple, installed by the controller with an
//        idle timeout), or
//      - arrive from outside and match an opt-in merge_services rule
//        (destination prefix + TCP port range), or
//      - are handshake packets (SYN or SYN-ACK), so the NIC learns each
//        side's MSS.
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
        meta.nic_port_set = true;
    }
    action no_nic_port() {
        meta.nic_port_set = false;
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
// the path MTU the switch believes in.
control PathProbes(inout local_metadata_t meta) {
    // Without a SmartNIC to send them to, no probe is special. One chain of
    // exclusive branches, each writing what it decides: a default
    // overwritten later would take a stage more on Tofino.
    apply {
        if (meta.nic_port_set && meta.port_role == PORT_ROLE_EXTERNAL
                && (meta.flow.later_fragment
                    || (meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT))) {
            meta.is_path_probe = true;
            meta.steer_reason = STEER_PATH_PROBE;
        } else if (meta.nic_port_set && meta.port_role == PORT_ROLE_NIC
                && meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT
                && meta.flow.src_port == PMTU_PROBE_PORT) {
            meta.is_path_probe = true;
        } else {
            meta.is_path_probe = false;
        }
    }
}

// Applied to every packet: its two lookups key on the flow alone, so on
// Tofino they run in the first stages, side by side with the jumbo policy.
// Only a packet held to its MTU (held_to_mtu: fully parsed, no path probe)
// that fits it and came from outside or from the rack may be steered:
// packets back from the SmartNIC (or the CPU) are never steered again.
// The decision reads the facts themselves, not a flag made of them, which
// on Tofino would cost a stage.
control Steering(inout local_metadata_t meta, in bool held_to_mtu) {
    // Whether the lookups hit, set by the entries' actions; what they
    // stand for is decided below. (Not `.apply().hit`: on Tofino each
    // branch on a hit is a table of its own, and every stage holds 16.)
    bool listed_flow;
    bool listed_service;

    action steer_merge_flow() {
        listed_flow = true;
    }
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
        listed_service = true;
    }
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

    apply {
        listed_flow = false;
        listed_service = false;
        if (meta.flow.is_tcp) {
            merge_flows.apply();
            if (meta.port_role == PORT_ROLE_EXTERNAL) {
                merge_services.apply();
            }
        }
        if (!held_to_mtu || meta.cmp.over_limit != 0 || meta.port_role == PORT_ROLE_NIC
                || !meta.nic_port_set || !meta.flow.is_tcp) {
            // Routed.
        } else if (meta.port_role == PORT_ROLE_INTERNAL && meta.cmp.over_path != 0) {
            // ip_len > path_mtu, as JumboPolicy measured it.
            meta.steer_reason = STEER_OUTBOUND_SPLIT;
        } else if (!meta.merge_eligible) {
            // Routed.
        } else if (listed_flow) {
            meta.steer_reason = STEER_MERGE_FLOW;
        } else if (listed_service) {
            meta.steer_reason = STEER_MERGE_SERVICE;
        } else if ((meta.flow.tcp_flags & TCP_FLAG_SYN) != 0) {
            meta.steer_reason = STEER_HANDSHAKE;
        }
    }
}

#endif
