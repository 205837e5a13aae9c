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
// epoch starts again from zero) and put the new count in `count_field`
// (0 when the packet is not counted); `on_count` and `on_pass` run beside
// it, when it counts and when not.
#define SKETCH_ROW(row, algo, fields, count_field, on_count, on_pass) \
    Register<sketch_cell_t, bit<SKETCH_INDEX_BITS>>(SKETCH_COLUMNS) sketch_##row; \
    Hash<bit<SKETCH_INDEX_BITS>>(HashAlgorithm_t.algo) row##_hash; \
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
    }; \
    @hidden action count_in_##row() { \
        count_field = count_##row.execute(row##_hash.get(fields(flow))); \
        on_count \
    } \
    @hidden action pass_##row() { \
        count_field = 0; \
        on_pass \
    } \
    @hidden table row##_counter { \
        key = { count_packet: exact @name("count_packet"); } \
        actions = { count_in_##row; pass_##row; } \
        const entries = { \
            true: count_in_##row(); \
        } \
        const default_action = pass_##row(); \
    }

// What the rows say about the threshold: each row's shortfall from it (0
// when that row reached it). Not a "reached" flag: the Bloom filter's
// gateways test the shortfalls themselves, so the filter runs in the stage
// after them, where a flag made of them would cost one more.
struct sketch_verdict_t {
    flag_t  counted;  // the rows counted the packet
    bit<32> short0;   // threshold |-| count0
    bit<32> short1;
    bit<32> short2;
}

// The three rows count side by side, in one stage, when count_packet is
// set: their key, not a gateway around them (see ElephantDetector). Also
// with a threshold of 0 (detection off): a test of the threshold in their
// key would make each a ternary table, in TCAM beside the routes;
// ElephantDetector then asks the filter for no report. What follows is
// shaped by Tofino's gateways, which compare a field with a constant only:
// the rows' shortfalls from the threshold as saturating differences,
// beside the smaller of two counts (the ALU's min), in one action and
// stage; in the next, the smallest count beside the Bloom filter.
control FlowSketch(in flow_t flow, in bit<16> epoch, in bit<16> packet_bytes,
                   in bit<32> threshold, in bool count_packet,
                   out bit<32> estimate, out sketch_verdict_t verdict) {
    // No initial values: each is written before it is read, and a field
    // with none lives only from its write to its last read, so the PHV
    // allocator can give its container to another field for the stages
    // before and after.
    bit<32> count0;
    bit<32> count1;
    bit<32> count2;
    // Only the first row says whether it counted: fields written by
    // several tables of one stage would be written one stage after another.
    SKETCH_ROW(row0, CRC32, FLOW_FIELDS_FORWARD, count0, verdict.counted = 1;, verdict.counted = 0;)
    SKETCH_ROW(row1, CRC32, FLOW_FIELDS_REVERSED, count1, , )
    SKETCH_ROW(row2, CRC16, FLOW_FIELDS_FORWARD, count2, , )
    bit<32> smaller_of_0_1;
    DIFFERENCE_STEP(measure_counts,
        verdict.short0 = threshold |-| count0;
        verdict.short1 = threshold |-| count1;
        verdict.short2 = threshold |-| count2;
        smaller_of_0_1 = min(count0, count1);)

    apply {
        row0_counter.apply();
        row1_counter.apply();
        row2_counter.apply();
        measure_counts_table.apply();
        estimate = min(smaller_of_0_1, count2);
    }
}

// One Bloom cell: stamp it with this epoch; 1 when it held another epoch.
#define BLOOM_CELL(cell, algo) \
    Register<bit<16>, bit<BLOOM_INDEX_BITS>>(BLOOM_BITS) reported_##cell; \
    Hash<bit<BLOOM_INDEX_BITS>>(HashAlgorithm_t.algo) cell##_hash; \
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

// report: raised when the flow reached the threshold (every row did, so their
// smallest count does) and this is its first report this epoch. The tests
// are nested: a gateway reads at most 4 bytes and 12 bits of PHV, and
// nested gateways share a stage with the Bloom cells they guard.
control ReportedFilter(in flow_t flow, in bit<16> epoch, in sketch_verdict_t verdict,
                       inout elephant_report_t report) {
    BLOOM_CELL(bloom0, CRC16)
    BLOOM_CELL(bloom1, CRC32)

    apply {
        if (verdict.counted == 1 && verdict.short0 == 0) {
            if (verdict.short1 == 0) {
                if (verdict.short2 == 0) {
                    bit<1> fresh0 = stamp_bloom0.execute(bloom0_hash.get(FLOW_FIELDS_REVERSED(flow)));
                    bit<1> fresh1 = stamp_bloom1.execute(bloom1_hash.get(FLOW_FIELDS_SHUFFLED(flow)));
                    if (fresh0 == 1 || fresh1 == 1) {
                        report = ELEPHANT_REPORTED;
                    }
                }
            }
        }
    }
}

#endif
