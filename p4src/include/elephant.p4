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
control ElephantDetector(inout local_metadata_t meta, in bit<48> now_us,
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

    apply {
        elephant_config.apply();
        if (meta.elephant_threshold != 0) {
            // The top bit keeps a live epoch from ever equalling the zero
            // that fresh registers hold.
            bit<16> epoch = ((bit<16>)(now_us >> ELEPHANT_EPOCH_LOG2_US)) | 0x8000;
            bit<32> estimate;
            flow_sketch.apply(meta.flow, epoch, wire_bytes, estimate);
            if (estimate >= meta.elephant_threshold) {
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
