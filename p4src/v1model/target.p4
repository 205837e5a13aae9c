// What the shared controls in ../include need from v1model, under the
// names they use on every target (p4src/tna/target.p4 gives the TNA side).
// Included by v1model/jumbogate.p4 before any shared file.
#ifndef JUMBOGATE_V1MODEL_TARGET_P4
#define JUMBOGATE_V1MODEL_TARGET_P4

#define TARGET_V1MODEL
#include <v1model.p4>

// Meter colours as v1model's execute_meter reports them.
typedef bit<2> meter_color_t;
const meter_color_t METER_COLOR_RED = 2;

#define PACKETS_AND_BYTES_COUNTER(size) counter(size, CounterType.packets_and_bytes)
#define PACKET_RATE_METER(size) meter(size, MeterType.packets)
#define METER_EXECUTE(m, index, color) m.execute_meter(index, color)

// v1model's hash() is a function of the algorithm: no unit to declare.
// (HASH_UNIT takes no semicolon after it, as it expands to nothing here.)
#define HASH_UNIT(name, index_bits, algo)
#define HASH_INDEX(name, algo, out, size, ...) \
    hash(out, HashAlgorithm.algo, 32w0, __VA_ARGS__, (bit<32>)(size))

// The smaller of two fields.
#define MIN_OF(a, b) ((a) < (b) ? (a) : (b))

// BMv2 knows the frame's length in ingress (ParseVerdict checks the IP
// length against it).
const bool FRAME_LENGTH_IN_INGRESS = true;

// Where a table sits in Tofino's pipeline (see tna/target.p4); nothing on
// v1model.
#define TOFINO_STAGE(n)

// What the elephant detector raises for a flow to report: a flag, for
// which the top level sends the digest.
typedef bool elephant_report_t;
#define ELEPHANT_REPORTED true

// The resubmitted pass keeps the offending packet's addresses in metadata
// (FIELD_LIST_ICMP_SIGNAL) for SignalBuilder.
const bool SIGNAL_CARRIES_ADDRESSES = true;

// The resubmitted pass that builds a signal counts it (v1model/signal.p4).
const bool SIGNAL_COUNTED_AT_REQUEST = false;

#define ECMP_SELECTOR(name, members) action_selector(HashAlgorithm.crc16, members, 16) name
#define IDLE_TIMEOUT support_timeout = true

// Header fields only v1model has: its parser reads IPv4 and TCP options as
// one varbit each, and the ICMP signal's second pass (v1model/signal.p4)
// parses the whole RFC-sized quote as headers, so that its checksum is a
// header checksum.
#define IPV4_OPTIONS_FIELD(name) ipv4_options_t name
#define TCP_OPTIONS_FIELD(name) tcp_options_t name;
#define EMIT_TCP_OPTIONS(packet, options) packet.emit(options);
#define GENEVE_OPTION_STACK_WORDS GENEVE_MAX_OPTION_WORDS
#define SIGNAL_HEADER_FIELDS \
    ipv4_t          signal_ipv4; \
    ipv6_t          signal_ipv6; \
    icmp_t          signal_icmp; \
    icmpv4_quote_t  icmpv4_quote; \
    icmpv6_quote_t  icmpv6_quote;
#define EMIT_SIGNAL_HEADERS(packet, hdr) \
    packet.emit(hdr.signal_ipv4); \
    packet.emit(hdr.signal_ipv6); \
    packet.emit(hdr.signal_icmp); \
    packet.emit(hdr.icmpv4_quote); \
    packet.emit(hdr.icmpv6_quote);

#endif
