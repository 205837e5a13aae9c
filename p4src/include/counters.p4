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
    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) port_rx;
    counter(DROP_REASON_COUNTER_SIZE, CounterType.packets_and_bytes) drop_reasons;
    counter(PATH_COUNTER_SIZE, CounterType.packets_and_bytes) paths;
    counter(ICMP_COUNTER_SIZE, CounterType.packets_and_bytes) icmp_signals;

    apply {
        if (is_signal) {
            // The resubmitted copy was already counted on its way in.
            icmp_signals.count(meta.signal_kind == SIGNAL_IPV4_FRAG_NEEDED
                ? ICMP_COUNTER_IPV4_FRAG_NEEDED : ICMP_COUNTER_IPV6_PACKET_TOO_BIG);
            return;
        }
        port_rx.count((bit<32>)ingress_port);
        if (meta.drop_reason != DROP_NONE) {
            drop_reasons.count((bit<32>)meta.drop_reason);
        } else if (meta.port_role == PORT_ROLE_NIC) {
            paths.count(PATH_NIC_RETURN);
        } else if (meta.forward_on_outer) {
            paths.count(PATH_DEPTH_FORWARDED);
        } else if (meta.steer_reason != STEER_NONE) {
            paths.count(PATH_MERGE);
        } else {
            paths.count(PATH_BYPASS);
        }
    }
}

control EgressCounters(in port_t egress_port) {
    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) port_tx;
    apply {
        port_tx.count((bit<32>)egress_port);
    }
}

#endif
