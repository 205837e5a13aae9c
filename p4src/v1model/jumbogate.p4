// jumbogate on v1model (BMv2 simple_switch_grpc): a thin top level that
// wires the shared parser and controls from ../include together and adds
// what only v1model has (standard_metadata, resubmit, truncate, checksums).
#include <core.p4>
#include "target.p4"

#include "../include/defines.p4"
#include "../include/drop_reasons.p4"
#include "../include/headers.p4"
#include "../include/parser.p4"
#include "../include/deparser.p4"
#include "../include/classifier.p4"
#include "../include/jumbo_policy.p4"
#include "../include/icmp_signal.p4"
#include "signal.p4"
#include "../include/steering.p4"
#include "sketch.p4"
#include "../include/elephant.p4"
#include "../include/routing.p4"
#include "../include/counters.p4"

parser V1ModelParser(packet_in packet,
                     out headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    JumbogateParser() jumbogate_parser;

    state start {
        transition select(standard_metadata.instance_type) {
            INSTANCE_TYPE_RESUBMIT: parse_signal_ethernet;
            default: parse_packet;
        }
    }
    state parse_packet {
        jumbogate_parser.apply(packet, hdr, meta.parsing);
        transition accept;
    }

    // The only packets jumbogate resubmits are oversized ones becoming ICMP
    // errors (icmp_signal.p4): read the L2 header, then the quote as one
    // opaque header. Signalled packets are longer than the quote by
    // construction (they exceeded an MTU of at least 1280 bytes).
    state parse_signal_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_signal_vlan;
            ETHERTYPE_IPV4: parse_icmpv4_quote;
            default: parse_icmpv6_quote;
        }
    }
    state parse_signal_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_icmpv4_quote;
            default: parse_icmpv6_quote;
        }
    }
    state parse_icmpv4_quote {
        packet.extract(hdr.icmpv4_quote);
        transition accept;
    }
    state parse_icmpv6_quote {
        packet.extract(hdr.icmpv6_quote);
        transition accept;
    }
}

control V1ModelVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control V1ModelIngress(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    PortRoles() port_roles;
    ParseVerdict() parse_verdict;
    FlowClassifier() flow_classifier;
    DepthPolicy() depth_policy;
    NicPort() nic_port;
    JumboPolicy() jumbo_policy;
    MtuEnforcement() mtu_enforcement;
    PathProbes() path_probes;
    Steering() steering;
    ElephantDetector() elephant_detector;
    Routing() routing;
    SignalBuilder() signal_builder;
    IngressCounters() counters;

    apply {
        if (standard_metadata.instance_type == INSTANCE_TYPE_RESUBMIT) {
            // The first pass checked that the frame holds the length its IP
            // header claims, so the quote always extracts; should it not,
            // no signal is built from a half-parsed copy (the original was
            // counted on its way in, as mtu-exceeded).
            if (standard_metadata.parser_error != error.NoError) {
                mark_to_drop(standard_metadata);
                return;
            }
            bit<32> frame_bytes;
            signal_builder.apply(hdr, meta, standard_metadata.egress_spec, frame_bytes);
            truncate(frame_bytes);
            counters.apply(standard_metadata.ingress_port, meta, true);
            return;
        }

        meta.drop_reason = DROP_NONE;
        meta.signal_kind = SIGNAL_NONE;
        meta.steer_reason = STEER_NONE;
        meta.forward_on_outer = false;
        elephant_report_t report_elephant = false;
        // The MTU policy holds for the packet (see MtuEnforcement).
        flag_t held_to_mtu = 0;

        // What needs only the port and the headers, for every packet (on
        // Tofino side by side in the first stages; tna/jumbogate.p4 has the
        // same order): the port's role, the parser's verdict, the flow,
        // where the SmartNIC is. A packet a later test drops has only
        // filled metadata nobody reads.
        port_roles.apply(standard_metadata.ingress_port, meta);
        parse_verdict.apply(hdr, meta,
            standard_metadata.parser_error != error.NoError,
            standard_metadata.parser_error == error.PacketTooShort,
            standard_metadata.packet_length);
        flow_classifier.apply(hdr, meta);
        nic_port.apply(meta);
        jumbo_policy.apply(hdr, meta);
        // The three in this order, each reading what the parser and the
        // first lookups found, not what the one before it decided: a packet
        // too deep to parse fully never reaches the MTU policy (DepthPolicy
        // drops it or routes it on its outer headers), nor does one from an
        // unassigned port, which is dropped whatever else is wrong with it.
        // On Tofino each decision read after another's write costs a stage.
        //
        // The MTU policy holds for fully parsed traffic from outside, from
        // the rack and back from the SmartNIC, path probes aside: what the
        // SmartNIC merged or could not split is held to the same MTUs, so
        // nothing leaves oversize to die without a signal.
        if (meta.drop_reason == DROP_NONE && !meta.parsing.depth_exceeded
                && (meta.port_role == PORT_ROLE_EXTERNAL
                    || meta.port_role == PORT_ROLE_INTERNAL
                    || meta.port_role == PORT_ROLE_NIC)) {
            path_probes.apply(meta, held_to_mtu);
        }
        if (meta.drop_reason == DROP_NONE && meta.parsing.depth_exceeded) {
            depth_policy.apply(meta);
        }
        if (meta.port_role == PORT_ROLE_UNASSIGNED) {
            meta.drop_reason = DROP_PORT_ROLE_UNASSIGNED;
        }
        // Steering and the elephant sketch before MtuEnforcement: they do
        // not depend on it (all read what JumboPolicy found), and on Tofino
        // 1 tables keep their program order unless the compiler proves they
        // need not, so the ICMP meters' stages would otherwise come first.
        steering.apply(meta, held_to_mtu);
        // BMv2's timestamp counts microseconds.
        elephant_detector.apply(meta,
            (bit<16>)(standard_metadata.ingress_global_timestamp >> ELEPHANT_EPOCH_LOG2_US),
            (bit<16>)standard_metadata.packet_length,
            // A merge-eligible TCP packet that Steering could have steered
            // and left on the bypass (see there).
            meta.elephant_candidate, report_elephant);
        mtu_enforcement.apply(standard_metadata.ingress_port, meta, held_to_mtu);

        bool forward = meta.drop_reason == DROP_NONE && meta.steer_reason == STEER_NONE;
        if (meta.drop_reason == DROP_NONE && meta.steer_reason != STEER_NONE) {
            standard_metadata.egress_spec = meta.nic_port;
        }
        if (forward) {
            // BMv2 ends the ingress pipeline at a lookup that lands on an
            // empty ECMP group (no action, no next node, nothing after it
            // runs): the packet would leave by port 0, uncounted. Marked to
            // drop first, it is at least dropped (still uncounted).
            mark_to_drop(standard_metadata);
        }
        routing.apply(hdr, meta, standard_metadata.egress_spec, forward);

        if (report_elephant) {
            digest<elephant_digest_t>(1, {
                meta.flow.ip_version,
                meta.flow.src_addr,
                meta.flow.dst_addr,
                meta.flow.protocol,
                meta.flow.src_port,
                meta.flow.dst_port,
                meta.elephant_estimate
            });
        }

        counters.apply(standard_metadata.ingress_port, meta, false);
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(standard_metadata);
        }
        if (meta.signal_kind != SIGNAL_NONE) {
            // The original is dropped; its resubmitted copy becomes the
            // ICMP error (see SignalBuilder).
            resubmit_preserving_field_list(FIELD_LIST_ICMP_SIGNAL);
        }
    }
}

control V1ModelEgress(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    EgressCounters() counters;
    apply {
        counters.apply(standard_metadata.egress_port);
    }
}

control V1ModelComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.signal_ipv4.isValid(), {
                hdr.signal_ipv4.version, hdr.signal_ipv4.ihl,
                hdr.signal_ipv4.dscp, hdr.signal_ipv4.ecn,
                hdr.signal_ipv4.total_len, hdr.signal_ipv4.identification,
                hdr.signal_ipv4.flag_reserved, hdr.signal_ipv4.flag_dont_fragment,
                hdr.signal_ipv4.flag_more_fragments, hdr.signal_ipv4.frag_offset,
                hdr.signal_ipv4.ttl, hdr.signal_ipv4.protocol,
                hdr.signal_ipv4.src_addr, hdr.signal_ipv4.dst_addr },
            hdr.signal_ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.signal_ipv4.isValid(), {
                hdr.signal_icmp.icmp_type, hdr.signal_icmp.code,
                hdr.signal_icmp.rest,
                hdr.icmpv4_quote.part0, hdr.icmpv4_quote.part1, hdr.icmpv4_quote.part2 },
            hdr.signal_icmp.checksum, HashAlgorithm.csum16);
        // ICMPv6 checksums include the IPv6 pseudo-header (RFC 8200 8.1).
        update_checksum(hdr.signal_ipv6.isValid(), {
                hdr.signal_ipv6.src_addr, hdr.signal_ipv6.dst_addr,
                meta.signal_upper_len, 24w0, IP_PROTO_ICMPV6,
                hdr.signal_icmp.icmp_type, hdr.signal_icmp.code,
                hdr.signal_icmp.rest,
                hdr.icmpv6_quote.part0, hdr.icmpv6_quote.part1, hdr.icmpv6_quote.part2,
                hdr.icmpv6_quote.part3, hdr.icmpv6_quote.part4 },
            hdr.signal_icmp.checksum, HashAlgorithm.csum16);
    }
}

control V1ModelDeparser(packet_out packet, in headers_t hdr) {
    JumbogateDeparser() jumbogate_deparser;
    apply {
        jumbogate_deparser.apply(packet, hdr);
    }
}

V1Switch(V1ModelParser(),
         V1ModelVerifyChecksum(),
         V1ModelIngress(),
         V1ModelEgress(),
         V1ModelComputeChecksum(),
         V1ModelDeparser()) main;
