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
                cell.bytes = cell.bytes + (bit<32>)packet_bytes; \
            } else { \
                cell.bytes = (bit<32>)packet_bytes; \
            } \
            cell.epoch = (bit<32>)epoch; \
            count = cell.bytes; \
        } \
    };

// The three rows count side by side, in one stage. What follows is shaped
// by Tofino's gateways, which compare a field with a constant only: the
// rows' shortfalls from the threshold as saturating differences, beside
// the smaller of two counts (the ALU's min), in one action and stage; in
// the next, "reached" (every row at the threshold, so their smallest is)
// and the smallest count, side by side.
control FlowSketch(in flow_t flow, in bit<16> epoch, in bit<16> packet_bytes,
                   in bit<32> threshold, out bit<32> estimate, out bool reached) {
    SKETCH_ROW(row0, SALT_ROW0)
    SKETCH_ROW(row1, SALT_ROW1)
    SKETCH_ROW(row2, SALT_ROW2)
    // No initial values: each is written before it is read, and a field
    // with none lives only from its write to its last read, so the PHV
    // allocator can give its container to another field for the stages
    // before and after.
    bit<32> count0;
    bit<32> count1;
    bit<32> count2;
    bit<32> short0;  // threshold |-| count0: 0 when count0 reached it
    bit<32> short1;
    bit<32> short2;
    bit<32> smaller_of_0_1;
    DIFFERENCE_STEP(measure_counts,
        short0 = threshold |-| count0;
        short1 = threshold |-| count1;
        short2 = threshold |-| count2;
        smaller_of_0_1 = min(count0, count1);)

    apply {
        count0 = count_row0.execute(row0_hash.get(FLOW_HASH_FIELDS(SALT_ROW0, flow)));
        count1 = count_row1.execute(row1_hash.get(FLOW_HASH_FIELDS(SALT_ROW1, flow)));
        count2 = count_row2.execute(row2_hash.get(FLOW_HASH_FIELDS(SALT_ROW2, flow)));
        measure_counts_table.apply();
        estimate = min(smaller_of_0_1, count2);
        // Nested: a gateway reads at most 4 bytes and 12 bits of PHV.
        reached = false;
        if (short0 == 0) {
            if (short1 == 0) {
                if (short2 == 0) {
                    reached = true;
                }
            }
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
