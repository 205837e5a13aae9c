// Observability: indexed packet-and-byte counters the controller reads over
// P4Runtime (BMv2 cannot read registers over P4Runtime; counters it can).
//   port_rx            index = ingress port, every packet received
//   port_tx            index = egress port, every packet sent
//   drop_reasons       index = drop reason (drop_reasons.p4)
//   paths              index = PATH_* (bypass, merge, NIC return, depth-forwarded)
//   icmp_signals       index = ICMP_COUNTER_* (ICMP errors generated)
#ifndef JUMBOGATE_COUNTERS_P4
#define JUMBOGATE_COUNTERS_P4

#include "headers.p4"

control IngressCounters(in port_t ingress_port,
                        in local_metadata_t meta,
                        in bool is_signal) {
    PACKETS_AND_BYTES_COUNTER(PORT_COUNTER_SIZE) port_rx;
    PACKETS_AND_BYTES_COUNTER(DROP_REASON_COUNTER_SIZE) drop_reasons;
    PACKETS_AND_BYTES_COUNTER(PATH_COUNTER_SIZE) paths;
    PACKETS_AND_BYTES_COUNTER(ICMP_COUNTER_SIZE) icmp_signals;

    // Each counter is counted at one place with a computed index: Tofino
    // gives an indexed counter to one table, so the same counter counted
    // from several branches would not fit.
    apply {
        // v1model counts a signal on the pass that builds it (is_signal);
        // TNA builds it in egress from a mirrored copy and counts it here,
        // where it is asked for (SIGNAL_COUNTED_AT_REQUEST).
        bit<32> signal = ICMP_COUNTER_IPV6_PACKET_TOO_BIG;
        if (meta.signal_kind == SIGNAL_IPV4_FRAG_NEEDED) {
            signal = ICMP_COUNTER_IPV4_FRAG_NEEDED;
        }
        if (is_signal || (SIGNAL_COUNTED_AT_REQUEST && meta.signal_kind != SIGNAL_NONE)) {
            icmp_signals.count(signal);
        }
        // The resubmitted copy was already counted on its way in.
        if (!is_signal) {
            port_rx.count((bit<32>)ingress_port);
            bit<32> path;
            if (meta.port_role == PORT_ROLE_NIC) {
                path = PATH_NIC_RETURN;
            } else if (meta.forward_on_outer) {
                path = PATH_DEPTH_FORWARDED;
            } else if (meta.steer_reason != STEER_NONE) {
                path = PATH_MERGE;
            } else {
                path = PATH_BYPASS;
            }
            if (meta.drop_reason != DROP_NONE) {
                drop_reasons.count((bit<32>)meta.drop_reason);
            } else {
                paths.count(path);
            }
        }
    }
}

control EgressCounters(in port_t egress_port) {
    PACKETS_AND_BYTES_COUNTER(PORT_COUNTER_SIZE) port_tx;
    apply {
        port_tx.count((bit<32>)egress_port);
    }
}

#endif
