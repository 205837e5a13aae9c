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
// Registers are not readable over P4Runtime on BMv2, which is fine: the
// controller only needs the digest.
#ifndef JUMBOGATE_ELEPHANT_P4
#define JUMBOGATE_ELEPHANT_P4

#include "headers.p4"

// Hash salts: one per sketch row and Bloom hash, so the indices differ.
const bit<8> SALT_ROW0 = 0x11;
const bit<8> SALT_ROW1 = 0x5a;
const bit<8> SALT_ROW2 = 0xc3;
const bit<8> SALT_BLOOM0 = 0x27;
const bit<8> SALT_BLOOM1 = 0x9e;

#define FLOW_HASH_FIELDS(salt) { salt, meta.flow.ip_version, meta.flow.src_addr, \
    meta.flow.dst_addr, meta.flow.protocol, meta.flow.src_port, meta.flow.dst_port }

// wire_bytes: the frame as received, never a length the packet claims (a
// 60-byte frame claiming 8500 bytes would otherwise count 140 times over).
control ElephantDetector(inout local_metadata_t meta, in bit<48> now_us,
                         in bit<32> wire_bytes) {
    register<bit<32>>(SKETCH_COLUMNS) sketch_row0_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row0_epoch;
    register<bit<32>>(SKETCH_COLUMNS) sketch_row1_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row1_epoch;
    register<bit<32>>(SKETCH_COLUMNS) sketch_row2_bytes;
    register<bit<16>>(SKETCH_COLUMNS) sketch_row2_epoch;
    register<bit<16>>(BLOOM_BITS) reported_bloom_epoch;

    bit<16> epoch = 0;

    action set_elephant_threshold(bit<32> bytes) {
        meta.elephant_threshold = bytes;
    }
    // Threshold in bytes per epoch; 0 turns detection off (the default).
    table elephant_config {
        key = {}
        actions = { set_elephant_threshold; }
        default_action = set_elephant_threshold(0);
        size = 1;
    }

    // Adds the packet to the flow's sketch counters of this epoch and returns
    // the flow's estimate (the smallest of its counters).
    action count_flow(out bit<32> estimate) {
        bit<32> packet_bytes = wire_bytes;
        bit<32> index0;
        bit<32> index1;
        bit<32> index2;
        hash(index0, HashAlgorithm.crc32, 32w0, FLOW_HASH_FIELDS(SALT_ROW0), (bit<32>)SKETCH_COLUMNS);
        hash(index1, HashAlgorithm.crc32, 32w0, FLOW_HASH_FIELDS(SALT_ROW1), (bit<32>)SKETCH_COLUMNS);
        hash(index2, HashAlgorithm.crc32, 32w0, FLOW_HASH_FIELDS(SALT_ROW2), (bit<32>)SKETCH_COLUMNS);
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
        count0 = (stamp0 == epoch ? count0 : 0) + packet_bytes;
        count1 = (stamp1 == epoch ? count1 : 0) + packet_bytes;
        count2 = (stamp2 == epoch ? count2 : 0) + packet_bytes;
        sketch_row0_bytes.write(index0, count0);
        sketch_row0_epoch.write(index0, epoch);
        sketch_row1_bytes.write(index1, count1);
        sketch_row1_epoch.write(index1, epoch);
        sketch_row2_bytes.write(index2, count2);
        sketch_row2_epoch.write(index2, epoch);
        bit<32> smaller = count0 < count1 ? count0 : count1;
        estimate = smaller < count2 ? smaller : count2;
    }

    // Marks the flow as reported in this epoch; `first` tells whether it
    // was not marked yet.
    action mark_reported(out bool first) {
        bit<32> bloom0;
        bit<32> bloom1;
        hash(bloom0, HashAlgorithm.crc32, 32w0, FLOW_HASH_FIELDS(SALT_BLOOM0), (bit<32>)BLOOM_BITS);
        hash(bloom1, HashAlgorithm.crc32, 32w0, FLOW_HASH_FIELDS(SALT_BLOOM1), (bit<32>)BLOOM_BITS);
        bit<16> seen0;
        bit<16> seen1;
        reported_bloom_epoch.read(seen0, bloom0);
        reported_bloom_epoch.read(seen1, bloom1);
        first = seen0 != epoch || seen1 != epoch;
        reported_bloom_epoch.write(bloom0, epoch);
        reported_bloom_epoch.write(bloom1, epoch);
    }

    apply {
        elephant_config.apply();
        if (meta.elephant_threshold != 0) {
            // The top bit is always set so that a never-written cell (stamp 0)
            // never looks current.
            epoch = ((bit<16>)(now_us >> ELEPHANT_EPOCH_LOG2_US)) | 0x8000;
            bit<32> estimate;
            count_flow(estimate);
            if (estimate >= meta.elephant_threshold) {
                bool first;
                mark_reported(first);
                if (first) {
                    digest<elephant_digest_t>(1, {
                        meta.flow.ip_version,
                        meta.flow.src_addr,
                        meta.flow.dst_addr,
                        meta.flow.protocol,
                        meta.flow.src_port,
                        meta.flow.dst_port,
                        estimate
                    });
                }
            }
        }
    }
}

#endif
