// jumbogate on TNA (Tofino 1; Tofino 2 through t2na): a thin top level that
// wires the shared controls from ../include together, as v1model/jumbogate.p4
// does, and adds what only Tofino has: the intrinsic metadata, a parser
// Tofino can run (parser.p4), registers as stateful ALUs (sketch.p4), the
// ICMP signal from a truncated mirrored copy (signal.p4), digests and
// checksums in the deparsers.
//
// Compiled by bf-p4c (p4src/compile-tofino.sh, `make p4-tofino`); no Tofino
// model runs here, so this top level is held to compiling, fitting and
// naming its P4Runtime objects as v1model does
// (controlplane/tests/test_p4_tofino.py).
#include <core.p4>
#include "../include/defines.p4"
#include "target.p4"

#include "../include/drop_reasons.p4"
#include "../include/headers.p4"
#include "parser.p4"
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

// Metadata starts at zero, as on v1model: the shared controls rely on it
// (a field a packet's path never sets reads as 0), and Tofino's PHV holds
// whatever the previous packet left unless told to clear it.
@pa_auto_init_metadata

struct tna_ingress_metadata_t {
    local_metadata_t jg;
    bridged_h        bridged;
    MirrorId_t       signal_session;
    // The mirror header's constant fields: a Tofino mirror field list
    // takes fields, not constants.
    bit<8>           signal_packet_kind;
    bit<6>           signal_pad;
}

parser TnaIngressParser(packet_in packet,
                        out headers_t hdr,
                        out tna_ingress_metadata_t md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    TnaJumbogateParser() jumbogate_parser;
    state start {
        md.signal_session = 0;
        md.signal_packet_kind = 0;
        md.signal_pad = 0;
        packet.extract(ig_intr_md);
        // Per-port metadata the program does not use.
        packet.advance(PORT_METADATA_SIZE);
        jumbogate_parser.apply(packet, hdr, md.jg.parsing);
        transition accept;
    }
}

control TnaIngress(inout headers_t hdr,
                   inout tna_ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
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
    IngressCounters() counters;

    apply {
        md.bridged.setValid();
        md.bridged.kind = PACKET_KIND_BRIDGED;
        md.jg.drop_reason = DROP_NONE;
        md.jg.signal_kind = SIGNAL_NONE;
        md.jg.steer_reason = STEER_NONE;
        md.jg.forward_on_outer = false;
        // The signal mirror header's fields, for every packet, though read
        // only when the packet is mirrored: set here, in the first stage,
        // they leave the request for a signal at the end a single write
        // (mirror_type), one table and stage.
        md.signal_packet_kind = PACKET_KIND_SIGNAL;
        md.signal_pad = 0;
        md.signal_session = SIGNAL_SESSION(ig_intr_md.ingress_port);
        // The MTU policy holds for the packet (see MtuEnforcement).
        flag_t held_to_mtu = 0;

        // What needs only the port and the headers, for every packet, side
        // by side in the first stages: the port's role, the parser's
        // verdict, the flow, where the SmartNIC is. A packet a later test
        // drops has only filled metadata nobody reads.
        port_roles.apply(ig_intr_md.ingress_port, md.jg);
        // Tofino's ingress does not know the frame's length (it may start
        // before the frame has arrived), so the check that the IP length
        // fits the frame cannot run here: the frame length passed is the
        // largest there is.
        parse_verdict.apply(hdr, md.jg,
            ig_prsr_md.parser_err != PARSER_ERROR_OK,
            (ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR) != 0,
            32w0xffffffff);
        flow_classifier.apply(hdr, md.jg);
        nic_port.apply(md.jg);
        jumbo_policy.apply(hdr, md.jg);
        // The three in this order, each reading what the parser and the
        // first lookups found, not what the one before it decided: a packet
        // too deep to parse fully never reaches the MTU policy (DepthPolicy
        // drops it or routes it on its outer headers), nor does one from an
        // unassigned port, which is dropped whatever else is wrong with it.
        // On Tofino each decision read after another's write costs a stage.
        //
        // The MTU policy holds for fully parsed traffic from outside, from
        // the rack and back from the SmartNIC, path probes aside (the
        // v1model top level says why).
        if (md.jg.drop_reason == DROP_NONE && !md.jg.parsing.depth_exceeded
                && (md.jg.port_role == PORT_ROLE_EXTERNAL
                    || md.jg.port_role == PORT_ROLE_INTERNAL
                    || md.jg.port_role == PORT_ROLE_NIC)) {
            path_probes.apply(md.jg, held_to_mtu);
        }
        if (md.jg.drop_reason == DROP_NONE && md.jg.parsing.depth_exceeded) {
            depth_policy.apply(md.jg);
        }
        if (md.jg.port_role == PORT_ROLE_UNASSIGNED) {
            md.jg.drop_reason = DROP_PORT_ROLE_UNASSIGNED;
        }
        // Steering and the elephant sketch before MtuEnforcement: they do
        // not depend on it (all read what JumboPolicy found), and on Tofino
        // 1 tables keep their program order unless the compiler proves they
        // need not, so the ICMP meters' stages would otherwise come first.
        steering.apply(md.jg, held_to_mtu);
        // Bytes by the IP length: the frame's length is not known here (see
        // above), and adding the Ethernet header's 14 or 18 bytes would tie
        // the IP length, by one more ALU operation, to the PHV group that
        // already holds every MTU and difference measured from it (a group
        // has 16 containers of a size on Tofino). So the sketch counts up
        // to 1% less than on v1model. Tofino's timestamp counts
        // nanoseconds: 2^10 of them stand for a microsecond (epochs of
        // 1.07 s instead of 1.05 s), and the epoch is a slice of it, not a
        // shift, which the PHV allocator could not place beside the
        // sketch's fields.
        elephant_detector.apply(md.jg,
            ig_prsr_md.global_tstamp[ELEPHANT_EPOCH_LOG2_US + 25:ELEPHANT_EPOCH_LOG2_US + 10],
            md.jg.flow.ip_len,
            // A merge-eligible TCP packet that Steering could have steered
            // and left on the bypass (see there).
            md.jg.elephant_candidate, ig_dprsr_md.digest_type);
        mtu_enforcement.apply(ig_intr_md.ingress_port, md.jg, held_to_mtu);

        if (md.jg.drop_reason == DROP_NONE && md.jg.steer_reason != STEER_NONE) {
            ig_tm_md.ucast_egress_port = md.jg.nic_port;
        }
        routing.apply(hdr, md.jg, ig_tm_md.ucast_egress_port,
            md.jg.drop_reason == DROP_NONE && md.jg.steer_reason == STEER_NONE);

        counters.apply(ig_intr_md.ingress_port, md.jg, false);
        if (md.jg.drop_reason != DROP_NONE) {
            ig_dprsr_md.drop_ctl = 1;
        }
        if (md.jg.signal_kind != SIGNAL_NONE) {
            // The original is dropped (drop_ctl bit 0 spares mirroring); its
            // mirrored copy, truncated by the session, becomes the ICMP
            // error in egress (signal.p4).
            ig_dprsr_md.mirror_type = MIRROR_TYPE_SIGNAL;
        }
    }
}

control TnaIngressDeparser(packet_out packet,
                           inout headers_t hdr,
                           in tna_ingress_metadata_t md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    // The untyped constructor, though deprecated: bf-p4c rejects the typed
    // Mirror(MIRROR_TYPE_SIGNAL) on Tofino 1 ("Inconsistent mirror
    // selectors"), so the emit below checks the type itself.
    Mirror() mirror;
    // Named as v1model names its digest (by the struct it carries), so the
    // controller and jumbogate-switch find the digest alike on both.
    @name("elephant_digest_t")
    Digest<elephant_digest_t>(DIGEST_TYPE_ELEPHANT) elephant_digest;
    JumbogateDeparser() jumbogate_deparser;

    apply {
        // Routing decrements the TTL without touching the checksum (see
        // Routing.decrement_ipv4_ttl): it is recomputed here, options
        // included.
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flag_reserved, hdr.ipv4.flag_dont_fragment,
                hdr.ipv4.flag_more_fragments, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                hdr.ipv4_options[0].data, hdr.ipv4_options[1].data,
                hdr.ipv4_options[2].data, hdr.ipv4_options[3].data,
                hdr.ipv4_options[4].data, hdr.ipv4_options[5].data,
                hdr.ipv4_options[6].data, hdr.ipv4_options[7].data,
                hdr.ipv4_options[8].data, hdr.ipv4_options[9].data });
        }
        if (ig_dprsr_md.mirror_type == MIRROR_TYPE_SIGNAL) {
            mirror.emit<signal_mirror_h>(md.signal_session, {
                md.signal_packet_kind, md.signal_pad, md.jg.signal_kind, md.jg.signal_mtu });
        }
        if (ig_dprsr_md.digest_type == DIGEST_TYPE_ELEPHANT) {
            elephant_digest.pack({
                md.jg.flow.ip_version,
                md.jg.flow.src_addr,
                md.jg.flow.dst_addr,
                md.jg.flow.protocol,
                md.jg.flow.src_port,
                md.jg.flow.dst_port,
                md.jg.elephant_estimate });
        }
        packet.emit(md.bridged);
        jumbogate_deparser.apply(packet, hdr);
    }
}

control TnaEgress(inout tna_egress_headers_t hdr,
                  inout tna_egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EgressCounters() counters;
    SignalBuilder() signal_builder;
    apply {
        if (hdr.signal.isValid()) {
            signal_builder.apply(hdr, meta);
        }
        counters.apply(eg_intr_md.egress_port);
    }
}

Pipeline(TnaIngressParser(),
         TnaIngress(),
         TnaIngressDeparser(),
         TnaEgressParser(),
         TnaEgress(),
         TnaEgressDeparser()) pipe;

Switch(pipe) main;
