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
    apply {
        meta.is_path_probe = false;
        if (!meta.nic_port_set) {
            return;
        }
        if (meta.port_role == PORT_ROLE_EXTERNAL) {
            if (meta.flow.later_fragment) {
                meta.is_path_probe = true;
            } else if (meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT) {
                meta.is_path_probe = true;
            }
            if (meta.is_path_probe) {
                meta.steer_reason = STEER_PATH_PROBE;
            }
        } else if (meta.port_role == PORT_ROLE_NIC) {
            if (meta.flow.protocol == IP_PROTO_UDP && meta.flow.dst_port == PMTU_PROBE_PORT) {
                if (meta.flow.src_port == PMTU_PROBE_PORT) {
                    meta.is_path_probe = true;
                }
            }
        }
    }
}

control Steering(inout local_metadata_t meta) {
    DIFFERENCE_STEP(measure_over_path, meta.cmp.over_path, meta.flow.ip_len |-| meta.path_mtu)

    action steer_merge_flow() {
        meta.steer_reason = STEER_MERGE_FLOW;
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
        meta.steer_reason = STEER_MERGE_SERVICE;
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
        meta.steer_reason = STEER_NONE;
        if (!meta.nic_port_set || !meta.flow.is_tcp) {
            return;
        }
        // ip_len > path_mtu, as a saturating difference (see MtuEnforcement).
        measure_over_path_table.apply();
        if (meta.port_role == PORT_ROLE_INTERNAL && meta.cmp.over_path != 0) {
            meta.steer_reason = STEER_OUTBOUND_SPLIT;
            return;
        }
        if (!meta.merge_eligible) {
            return;
        }
        if (merge_flows.apply().hit) {
            return;
        }
        if (meta.port_role == PORT_ROLE_EXTERNAL) {
            if (merge_services.apply().hit) {
                return;
            }
        }
        if ((meta.flow.tcp_flags & TCP_FLAG_SYN) != 0) {
            meta.steer_reason = STEER_HANDSHAKE;
        }
    }
}

#endif
