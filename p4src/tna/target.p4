// What the shared controls in ../include need from TNA (Tofino 1, and
// Tofino 2 through t2na), under the names they use on every target
// (v1model/target.p4 gives the v1model side). Included by tna/jumbogate.p4
// before any shared file.
#ifndef JUMBOGATE_TNA_TARGET_P4
#define JUMBOGATE_TNA_TARGET_P4

#define TARGET_TNA
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

// Meter colours as a Tofino meter reports them (MeterColor_t).
typedef bit<8> meter_color_t;
const meter_color_t METER_COLOR_RED = 3;

// Indexed by bit<32> as on v1model, so the shared controls index both the
// same way; the compiler keeps only the bits the size needs.
#define PACKETS_AND_BYTES_COUNTER(size) \
    Counter<bit<64>, bit<32>>(size, CounterType_t.PACKETS_AND_BYTES)
#define PACKET_RATE_METER(size) Meter<bit<32>>(size, MeterType_t.PACKETS)
#define METER_EXECUTE(m, index, color) color = m.execute(index)

// A Tofino hash is a unit of its own (a hash distribution unit of the stage
// that uses it), declared once and asked for a value; its width is the index
// width, so no modulo is needed (the sizes it indexes are powers of two).
#define HASH_ALGO_crc16 HashAlgorithm_t.CRC16
#define HASH_ALGO_crc32 HashAlgorithm_t.CRC32
#define HASH_UNIT(name, index_bits, algo) Hash<bit<index_bits>>(HASH_ALGO_##algo) name;
#define HASH_INDEX(name, algo, out, size, ...) out = (bit<32>)name.get(__VA_ARGS__)

// The selector's hash is a unit too; FAIR spreads flows evenly over a
// group's members.
#define ECMP_SELECTOR(name, members) \
    Hash<bit<16>>(HashAlgorithm_t.CRC16) name##_hash; \
    ActionSelector(members, name##_hash, SelectorMode_t.FAIR) name
#define IDLE_TIMEOUT idle_timeout = true

// The smaller of two fields: the action ALU's min instruction, one
// operation, where a comparison of two fields would need a difference, a
// gateway and a stage more.
#define MIN_OF(a, b) min(a, b)

// Tofino's parser has no varbit extraction that can be sized from a field
// it has just read, so IPv4 options are read as 4-byte words, one state per
// word count; TCP options stay payload (tna/parser.p4): no field, nothing
// to emit.
#define IPV4_OPTIONS_FIELD(name) option_word_t[10] name
#define TCP_OPTIONS_FIELD(name)
#define EMIT_TCP_OPTIONS(packet, options)
// Geneve option words: each one costs 32 bits of the packet header vector
// (PHV; 4096 bits for everything a packet carries through a Tofino 1
// pipeline), so the parser keeps at most TNA_GENEVE_OPTION_WORDS words and
// treats longer options as past the parse budget (tna/parser.p4).
#if PARSE_DEPTH_BYTES >= 512
#define TNA_GENEVE_OPTION_WORDS 16
#else
#define TNA_GENEVE_OPTION_WORDS 7
#endif
#define GENEVE_OPTION_STACK_WORDS TNA_GENEVE_OPTION_WORDS

// The ICMP signal is built in egress from a truncated mirrored copy
// (tna/signal.p4), with headers of its own: none in the ingress header set.
#define SIGNAL_HEADER_FIELDS
#define EMIT_SIGNAL_HEADERS(packet, hdr)
const bool SIGNAL_COUNTED_AT_REQUEST = true;

// Tofino's ingress may start on a frame before it has all arrived, so it
// does not know the frame's length: ParseVerdict cannot check the IP length
// against it there.
const bool FRAME_LENGTH_IN_INGRESS = false;

// Pins a table to a stage. bf-p4c places tables greedily, as early as their
// inputs allow: big tables that are read late (the merge lists, the
// routes) would take the first stages' memory from the lookups that every
// later decision waits for. docs/dataplane.md has the stage map.
#define TOFINO_STAGE(n) @stage(n)

// What the elephant detector raises for a flow to report: the ingress
// deparser's digest type itself, written where the Bloom filter decides. A
// flag turned into the type afterwards would take one more stage.
const DigestType_t DIGEST_TYPE_ELEPHANT = 1;
typedef bit<3> elephant_report_t;
#define ELEPHANT_REPORTED DIGEST_TYPE_ELEPHANT

// The signal's addresses come from the quote in egress (tna/signal.p4), not
// from metadata: 256 PHV bits saved.
const bool SIGNAL_CARRIES_ADDRESSES = false;

#endif
