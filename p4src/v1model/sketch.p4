// The elephant sketch's state on v1model (see ../include/elephant.p4):
// BMv2 registers, read and written in one action each, as many times as the
// logic needs.
#ifndef JUMBOGATE_V1MODEL_SKETCH_P4
#define JUMBOGATE_V1MODEL_SKETCH_P4

#include "../include/headers.p4"
#include "../include/flow_hash.p4"

// What the sketch tells the filter: whether the estimate reached the
// threshold.
struct sketch_verdict_t {
    bool reached;
}

// count: the packet is to be counted (with a threshold of 0, none is).
// estimate: the flow's bytes this epoch (the smallest of its counters).
control FlowSketch(in flow_t flow, in bit<16> epoch, in bit<16> packet_bytes,
                   in bit<32> threshold, in bool count,
                   out bit<32> estimate, out sketch_verdict_t verdict) {
    register<bit<32>>(SKETCH_COLUMNS) sketch_row0_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row0_epoch;
    register<bit<32>>(SKETCH_COLUMNS) sketch_row1_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row1_epoch;
    register<bit<32>>(SKETCH_COLUMNS) sketch_row2_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row2_epoch;

    // Adds the packet to the flow's sketch counters of this epoch and returns
    // the flow's estimate (the smallest of its counters).
    action count_flow(out bit<32> smallest) {
        bit<32> index0;
        bit<32> index1;
        bit<32> index2;
        hash(index0, HashAlgorithm.crc32, 32w0, FLOW_FIELDS_FORWARD(flow), (bit<32>)SKETCH_COLUMNS);
        hash(index1, HashAlgorithm.crc32, 32w0, FLOW_FIELDS_REVERSED(flow), (bit<32>)SKETCH_COLUMNS);
        hash(index2, HashAlgorithm.crc16, 32w0, FLOW_FIELDS_FORWARD(flow), (bit<32>)SKETCH_COLUMNS);
        bit<32> count0;
        bit<32> count1;
        bit<32> count2;
        bit<16> stamp0;
        bit<16> stamp1;
        bit<16> stamp2;
        sketch_row0_bytes.read(count0, index0);
        sketch_row0_epoch.read(stamp0, index0);
        sketch_row1_bytes.read(count1, index1);
        sketch_row1_epoch.read(stamp1, index1);
        sketch_row2_bytes.read(count2, index2);
        sketch_row2_epoch.read(stamp2, index2);
        // A counter stamped with an older epoch starts again from zero.
        count0 = (stamp0 == epoch ? count0 : 0) + (bit<32>)packet_bytes;
        count1 = (stamp1 == epoch ? count1 : 0) + (bit<32>)packet_bytes;
        count2 = (stamp2 == epoch ? count2 : 0) + (bit<32>)packet_bytes;
        sketch_row0_bytes.write(index0, count0);
        sketch_row0_epoch.write(index0, epoch);
        sketch_row1_bytes.write(index1, count1);
        sketch_row1_epoch.write(index1, epoch);
        sketch_row2_bytes.write(index2, count2);
        sketch_row2_epoch.write(index2, epoch);
        bit<32> smaller = count0 < count1 ? count0 : count1;
        smallest = smaller < count2 ? smaller : count2;
    }

    apply {
        if (count && threshold != 0) {
            count_flow(estimate);
            verdict.reached = estimate >= threshold;
        } else {
            estimate = 0;
            verdict.reached = false;
        }
    }
}

// report: raised when the flow reached the threshold and was not reported yet
// this epoch.
control ReportedFilter(in flow_t flow, in bit<16> epoch, in sketch_verdict_t verdict,
                       inout elephant_report_t report) {
    register<bit<16>>(BLOOM_BITS) reported_bloom_epoch;

    // Marks the flow as reported in this epoch; `unmarked` tells whether it
    // was not marked yet.
    action mark_reported(out bool unmarked) {
        bit<32> bloom0;
        bit<32> bloom1;
        hash(bloom0, HashAlgorithm.crc16, 32w0, FLOW_FIELDS_REVERSED(flow), (bit<32>)BLOOM_BITS);
        hash(bloom1, HashAlgorithm.crc32, 32w0, FLOW_FIELDS_SHUFFLED(flow), (bit<32>)BLOOM_BITS);
        bit<16> seen0;
        bit<16> seen1;
        reported_bloom_epoch.read(seen0, bloom0);
        reported_bloom_epoch.read(seen1, bloom1);
        unmarked = seen0 != epoch || seen1 != epoch;
        reported_bloom_epoch.write(bloom0, epoch);
        reported_bloom_epoch.write(bloom1, epoch);
    }

    apply {
        if (verdict.reached) {
            mark_reported(report);
        }
    }
}

#endif
