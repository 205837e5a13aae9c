// Constants shared by every jumbogate top level (v1model and TNA).
#ifndef JUMBOGATE_DEFINES_P4
#define JUMBOGATE_DEFINES_P4

// How many bytes from the start of the frame the parser may consume.
// A hardware parser only sees a bounded window of the packet (Tofino's
// parser walks at most a few hundred bytes before the packet body is
// committed to the buffer), so the budget is a build-time profile rather than
// a runtime knob. Build profiles: 256 and 512 (see p4src/compile.sh).
#ifndef PARSE_DEPTH_BYTES
#define PARSE_DEPTH_BYTES 512
#endif

// Length of one elephant-detection epoch, as a power of two of the switch's
// microsecond timestamp: 2^20 us is about 1.05 s.
#ifndef ELEPHANT_EPOCH_LOG2_US
#define ELEPHANT_EPOCH_LOG2_US 20
#endif

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
// Flow addresses are kept 128 bits wide; IPv4 addresses are zero-extended so
// that one set of tables and one hash serve both families.
typedef bit<128> flow_addr_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<16> ETHERTYPE_VLAN = 0x8100;
// Geneve's protocol type for an encapsulated Ethernet frame.
const bit<16> ETHERTYPE_TRANSPARENT_BRIDGING = 0x6558;

const bit<8> IP_PROTO_ICMP   = 1;
const bit<8> IP_PROTO_TCP    = 6;
const bit<8> IP_PROTO_UDP    = 17;
const bit<8> IP_PROTO_ICMPV6 = 58;

const bit<16> UDP_PORT_GENEVE = 6081;
// parser_metadata_t.next when a sub-parser stopped without extracting; no
// EtherType, IP protocol or UDP port the parser dispatches on has this value.
const bit<16> NEXT_NONE = 0xffff;

// Header sizes in bytes, used for the parse-depth arithmetic.
const bit<16> ETHERNET_BYTES   = 14;
const bit<16> VLAN_BYTES       = 4;
const bit<16> IPV4_MIN_BYTES   = 20;
const bit<16> IPV6_BYTES       = 40;
const bit<16> TCP_MIN_BYTES    = 20;
const bit<16> UDP_BYTES        = 8;
const bit<16> ICMP_BYTES       = 8;
const bit<16> GENEVE_BYTES     = 8;
const bit<16> GENEVE_WORD_BYTES = 4;
// Geneve's option length is a 6-bit count of 4-byte words.
#define GENEVE_MAX_OPTION_WORDS 63

// The two MTUs jumbogate knows about: the Internet's and the rack's jumbo
// size. 8500 leaves room under the 9000-byte underlay for outer IPv6, UDP,
// Geneve with its largest options and the inner Ethernet header (see
// docs/dataplane.md).
const bit<16> MTU_STANDARD = 1500;
const bit<16> MTU_JUMBO    = 8500;
// IPv6's minimum link MTU (RFC 8200): the path MTU an IPv6 destination gets
// before a controller says otherwise. IPv6 routers never fragment, so a
// guess larger than the path is a black hole wherever ICMPv6 is filtered.
const bit<16> MTU_IPV6_MINIMUM = 1280;

// Port roles, written by the controller into the port_roles table.
// External: the 1500-byte Internet side. Internal: the rack. NIC: the
// SmartNIC that merges and splits. CPU: the switch's CPU port (its number
// comes from the switch's --cpu-port). Packets from NIC and CPU ports are
// routed as they are, never steered.
// A yes/no fact that a constant decision table keys on (JumboPolicy's
// limits, Steering's decision): BMv2 takes no boolean in a ternary entry,
// and on Tofino a boolean cast to a bit for a key is a copy, made in a
// stage before the table.
typedef bit<1> flag_t;

typedef bit<3> port_role_t;
const port_role_t PORT_ROLE_UNASSIGNED = 0;
const port_role_t PORT_ROLE_EXTERNAL   = 1;
const port_role_t PORT_ROLE_INTERNAL   = 2;
const port_role_t PORT_ROLE_NIC        = 3;
const port_role_t PORT_ROLE_CPU        = 4;

// ICMP "too big" signalling. The quote is the start of the offending IP
// packet: RFC 1812 caps an ICMPv4 error at 576 bytes (20 IPv4 + 8 ICMP +
// 548 quoted); RFC 4443 caps an ICMPv6 error at the IPv6 minimum MTU of 1280
// (40 IPv6 + 8 ICMPv6 + 1232 quoted). Every packet that triggers a signal is
// longer than its MTU and so longer than the quote: the quote size is fixed.
const bit<16> ICMPV4_QUOTE_BYTES = 548;
const bit<16> ICMPV6_QUOTE_BYTES = 1232;
const bit<8>  ICMPV4_TYPE_DEST_UNREACHABLE = 3;
const bit<8>  ICMPV4_CODE_FRAGMENTATION_NEEDED = 4;
const bit<8>  ICMPV6_TYPE_PACKET_TOO_BIG = 2;
const bit<8>  SIGNAL_TTL = 64;

// What kind of signal a resubmitted packet carries.
typedef bit<2> signal_kind_t;
const signal_kind_t SIGNAL_NONE = 0;
const signal_kind_t SIGNAL_IPV4_FRAG_NEEDED = 1;
const signal_kind_t SIGNAL_IPV6_PACKET_TOO_BIG = 2;

// Indices of the icmp_signals_generated counter.
const bit<32> ICMP_COUNTER_IPV4_FRAG_NEEDED = 0;
const bit<32> ICMP_COUNTER_IPV6_PACKET_TOO_BIG = 1;
#define ICMP_COUNTER_SIZE 2

// Indices of the path_packets counter.
const bit<32> PATH_BYPASS         = 0; // routed straight, not via the SmartNIC
const bit<32> PATH_MERGE          = 1; // steered to the SmartNIC
const bit<32> PATH_NIC_RETURN     = 2; // came back from the SmartNIC, routed
const bit<32> PATH_DEPTH_FORWARDED = 3; // too deep to parse, routed on outer headers
#define PATH_COUNTER_SIZE 4

// Why a packet was sent to the SmartNIC (carried in metadata, useful in logs).
typedef bit<3> steer_reason_t;
const steer_reason_t STEER_NONE          = 0;
const steer_reason_t STEER_MERGE_FLOW    = 1;
const steer_reason_t STEER_MERGE_SERVICE = 2;
const steer_reason_t STEER_HANDSHAKE     = 3;
const steer_reason_t STEER_OUTBOUND_SPLIT = 4;
const steer_reason_t STEER_PATH_PROBE    = 5;

// UDP port of path MTU discovery's probes and replies between borders
// (docs/pathmtu.md; jumbogate-nic's --pmtu-port).
const bit<16> PMTU_PROBE_PORT = 48999;

// A hidden keyless table whose one action runs the assignments given
// (saturating differences that conditions then test against zero; see
// comparisons_t in headers.p4). Several in one action are computed side by
// side, in one Tofino stage. Hidden: it has no P4Runtime face, the
// controller never writes it.
#define DIFFERENCE_STEP(name, ...) \
    @hidden action name() { __VA_ARGS__ } \
    @hidden table name##_table { \
        actions = { name; } \
        const default_action = name(); \
        size = 1; \
    }

// Sizes of indexed externs.
#define PORT_COUNTER_SIZE 512
#define DROP_REASON_COUNTER_SIZE 256
#define ICMP_METER_SIZE 512
// Cells of the per-source ICMP meter: sources hash into them by prefix
// (/24, /48), so a flood from one prefix turns only its own cell red.
#define ICMP_SOURCE_METER_SIZE 256

// Count-min sketch geometry for elephant detection: SKETCH_ROWS rows of
// SKETCH_COLUMNS byte counters, and a Bloom filter of BLOOM_BITS bits.
#define SKETCH_COLUMNS 4096
#define SKETCH_INDEX_BITS 12
#define BLOOM_BITS 8192
#define BLOOM_INDEX_BITS 13

// v1model packet instance types as BMv2 numbers them.
const bit<32> INSTANCE_TYPE_RESUBMIT = 6;

// Field-list id of the resubmit that carries an ICMP signal. The
// @field_list annotations in headers.p4 must use the same literal (p4c reads
// annotation arguments as literals).
const bit<8> FIELD_LIST_ICMP_SIGNAL = 1;

const bit<8> TCP_FLAG_SYN = 0x02;
const bit<8> TCP_FLAG_ACK = 0x10;

#endif
