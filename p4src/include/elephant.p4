// Elephant detection in the data plane, for merge-eligible TCP flows that
// are still on the bypass.
//
// A count-min sketch (3 rows x SKETCH_COLUMNS byte counters, one hash per
// row) estimates each flow's bytes in the current epoch. Each counter stores
// the epoch it belongs to next to its count; a counter from an older epoch
// reads as zero and is overwritten, so counters reset every epoch without the
// controller. Epoch = switch timestamp (us) >> ELEPHANT_EPOCH_LOG2_US (about 1 s).
//
// When the estimate reaches the controller's threshold the flow is reported
// with a digest, at most once per epoch: a Bloom filter (2 hashes over
// BLOOM_BITS cells, also epoch-stamped) remembers which flows were reported.
//
// The sketch and the filter are state, which each target keeps its own way
// (FlowSketch and ReportedFilter in v1model/sketch.p4 and tna/sketch.p4,
// included by the top level before this file); the decision is shared.
// Registers are not readable over P4Runtime on BMv2, which is fine: the
// controller only needs the digest, which the top level sends.
#ifndef JUMBOGATE_ELEPHANT_P4
#define JUMBOGATE_ELEPHANT_P4

#include "headers.p4"
#include "flow_hash.p4"


// wire_bytes: the frame as received, never a length the packet claims (a
// 60-byte frame claiming 8500 bytes would otherwise count 140 times over);
// 16 bits hold any frame, and the sketch's 32-bit counts widen it.
// epoch_clock: the switch's time in epochs of about a second (2^20 us,
// ELEPHANT_EPOCH_LOG2_US), as the top level reads its target's clock.
// count_packet: the packet is a merge-eligible TCP one on the bypass. Applied
// for every packet, so that the threshold is read in the first stage on
// Tofino; only counted packets touch the sketch.
// report: raised (ELEPHANT_REPORTED) for a flow to report; its type is the
// target's (elephant_report_t), as is sending the digest.
control ElephantDetector(inout local_metadata_t meta, in bit<16> epoch_clock,
                         in bit<16> wire_bytes, in bool count_packet,
                         inout elephant_report_t report) {
    FlowSketch() flow_sketch;
    ReportedFilter() reported_filter;

    bit<16> epoch;

    action set_elephant_threshold(bit<32> bytes) {
        meta.elephant_threshold = bytes;
        // The top bit keeps a live epoch from ever equalling the zero that
        // fresh registers hold. Worked out here, in the first stages on
        // Tofino: as a statement of its own it is a table that the
        // compiler may place late, and the sketch waits for it.
        epoch = epoch_clock | 0x8000;
    }
    // Threshold 0 (the default) turns detection off.
    table elephant_config {
        key = {}
        actions = { set_elephant_threshold; }
        default_action = set_elephant_threshold(0);
        size = 1;
    }

    apply {
        elephant_config.apply();
        // Whether the packet is counted (count_packet, and on v1model a
        // threshold other than 0) is for the sketch to test: on Tofino it
        // is the rows' own key, as a test around them would hold them back
        // until the ICMP meters' stages are done. The estimate goes straight
        // where the digest reads it (read only when a report is due): no
        // second copy of 32 bits. The verdict (has the flow reached the
        // threshold?) is the target's own: the filter tests it, and on
        // Tofino a flag made of it would cost a stage.
        sketch_verdict_t verdict;
        flow_sketch.apply(meta.flow, epoch, wire_bytes, meta.elephant_threshold,
                          count_packet, meta.elephant_estimate, verdict);
        // The first report of the flow this epoch; with a threshold of 0
        // (detection off), none.
        if (meta.elephant_threshold != 0) {
            reported_filter.apply(meta.flow, epoch, verdict, report);
        }
    }
}

#endif
