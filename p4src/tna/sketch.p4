// The elephant sketch's state on Tofino (see ../include/elephant.p4).
//
// Why it differs from v1model/sketch.p4: a Tofino register is read and
// written once per packet, by one stateful ALU, in the stage that holds it.
// So each sketch row keeps its count and its epoch side by side in one
// 64-bit cell (a register pair), and the "older epoch reads as zero" rule
// runs inside the RegisterAction; the Bloom filter's two cells live in two
// registers, one per hash, since one register cannot be touched twice.
#ifndef JUMBOGATE_TNA_SKETCH_P4
#define JUMBOGATE_TNA_SKETCH_P4

#include "../include/headers.p4"
#include "../include/flow_hash.p4"

struct sketch_cell_t {
    bit<32> bytes;
    bit<32> epoch;
}

// One row: add the packet to this epoch's count (a cell from an older
// epoch starts again from zero) and return the new count.
#define SKETCH_ROW(row, salt) \
    Register<sketch_cell_t, bit<SKETCH_INDEX_BITS>>(SKETCH_COLUMNS) sketch_##row; \
    Hash<bit<SKETCH_INDEX_BITS>>(HashAlgorithm_t.CRC32) row##_hash; \
    RegisterAction<sketch_cell_t, bit<SKETCH_INDEX_BITS>, bit<32>>(sketch_##row) count_##row = { \
        void apply(inout sketch_cell_t cell, out bit<32> count) { \
            if (cell.epoch == (bit<32>)epoch) { \
                cell.bytes = cell.bytes + packet_bytes; \
            } else { \
                cell.bytes = packet_bytes; \
            } \
            cell.epoch = (bit<32>)epoch; \
            count = cell.bytes; \
        } \
    };

control FlowSketch(inout local_metadata_t meta, in bit<16> epoch,
                   in bit<32> packet_bytes, out bit<32> estimate) {
    SKETCH_ROW(row0, SALT_ROW0)
    SKETCH_ROW(row1, SALT_ROW1)
    SKETCH_ROW(row2, SALT_ROW2)
    bit<32> count1 = 0;
    bit<32> count2 = 0;
    DIFFERENCE_STEP(measure_count1_above, meta.cmp.count_above, count1 |-| estimate)
    DIFFERENCE_STEP(measure_count2_above, meta.cmp.count_above, count2 |-| estimate)

    apply {
        bit<32> count0 = count_row0.execute(row0_hash.get(FLOW_HASH_FIELDS(SALT_ROW0, meta.flow)));
        count1 = count_row1.execute(row1_hash.get(FLOW_HASH_FIELDS(SALT_ROW1, meta.flow)));
        count2 = count_row2.execute(row2_hash.get(FLOW_HASH_FIELDS(SALT_ROW2, meta.flow)));
        // The smallest count; "count <= estimate" as a saturating
        // difference that is zero (gateways compare with constants only).
        estimate = count0;
        measure_count1_above_table.apply();
        if (meta.cmp.count_above == 0) {
            estimate = count1;
        }
        measure_count2_above_table.apply();
        if (meta.cmp.count_above == 0) {
            estimate = count2;
        }
    }
}

// One Bloom cell: stamp it with this epoch; 1 when it held another epoch.
#define BLOOM_CELL(cell, salt) \
    Register<bit<16>, bit<BLOOM_INDEX_BITS>>(BLOOM_BITS) reported_##cell; \
    Hash<bit<BLOOM_INDEX_BITS>>(HashAlgorithm_t.CRC32) cell##_hash; \
    RegisterAction<bit<16>, bit<BLOOM_INDEX_BITS>, bit<1>>(reported_##cell) stamp_##cell = { \
        void apply(inout bit<16> stamp, out bit<1> fresh) { \
            if (stamp == epoch) { \
                fresh = 0; \
            } else { \
                fresh = 1; \
            } \
            stamp = epoch; \
        } \
    };

control ReportedFilter(in flow_t flow, in bit<16> epoch, out bool first) {
    BLOOM_CELL(bloom0, SALT_BLOOM0)
    BLOOM_CELL(bloom1, SALT_BLOOM1)

    apply {
        bit<1> fresh0 = stamp_bloom0.execute(bloom0_hash.get(FLOW_HASH_FIELDS(SALT_BLOOM0, flow)));
        bit<1> fresh1 = stamp_bloom1.execute(bloom1_hash.get(FLOW_HASH_FIELDS(SALT_BLOOM1, flow)));
        first = false;
        if (fresh0 == 1 || fresh1 == 1) {
            first = true;
        }
    }
}

#endif
