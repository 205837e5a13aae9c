// Elephant detection in the data plane, for merge-eligible flows that are
// still on the bypass.
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
// 60-byte frame claiming 8500 bytes would otherwise count 140 times over).
// epoch_clock: the switch's time in epochs of about a second (2^20 us,
// ELEPHANT_EPOCH_LOG2_US), as the top level reads its target's clock.
control ElephantDetector(inout local_metadata_t meta, in bit<16> epoch_clock,
                         in bit<32> wire_bytes) {
    FlowSketch() flow_sketch;
    ReportedFilter() reported_filter;

    action set_elephant_threshold(bit<32> bytes) {
        meta.elephant_threshold = bytes;
    }
    // Threshold 0 (the default) turns detection off.
    table elephant_config {
        key = {}
        actions = { set_elephant_threshold; }
        default_action = set_elephant_threshold(0);
        size = 1;
    }

    bit<16> epoch = 0;
    bit<32> estimate = 0;
    DIFFERENCE_STEP(measure_short_of_threshold, meta.cmp.short_of_threshold,
                    meta.elephant_threshold |-| estimate)

    apply {
        elephant_config.apply();
        if (meta.elephant_threshold != 0) {
            // The top bit keeps a live epoch from ever equalling the zero
            // that fresh registers hold.
            epoch = epoch_clock | 0x8000;
            flow_sketch.apply(meta, epoch, wire_bytes, estimate);
            // estimate >= threshold, as a saturating difference (see
            // comparisons_t).
            measure_short_of_threshold_table.apply();
            if (meta.cmp.short_of_threshold == 0) {
                bool first;
                reported_filter.apply(meta.flow, epoch, first);
                if (first) {
                    meta.report_elephant = true;
                    meta.elephant_estimate = estimate;
                }
            }
        }
    }
}

#endif
