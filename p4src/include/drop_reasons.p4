// The single list of drop reasons. The controller reads it too
// (controlplane/src/jumbogate/p4/drop_reasons.py parses these lines), so keep
// the one-constant-per-line form `const drop_reason_t DROP_NAME = N;`.
// Values index the drop_reasons counter; never renumber a released reason.
#ifndef JUMBOGATE_DROP_REASONS_P4
#define JUMBOGATE_DROP_REASONS_P4

typedef bit<8> drop_reason_t;

const drop_reason_t DROP_NONE = 0;
// A header would end past PARSE_DEPTH_BYTES (counted only when the depth
// policy drops; forwarded ones are counted on the path counter).
const drop_reason_t DROP_PARSE_DEPTH_EXCEEDED = 1;
// A header starts inside the packet but ends past its last byte.
const drop_reason_t DROP_TRUNCATED = 2;
const drop_reason_t DROP_IPV4_IHL_INVALID = 3;
const drop_reason_t DROP_TCP_DATA_OFFSET_INVALID = 4;
// Geneve's option length points past the end of the packet.
const drop_reason_t DROP_GENEVE_OPTIONS_PAST_PACKET = 5;
const drop_reason_t DROP_TTL_EXPIRED = 6;
const drop_reason_t DROP_HOP_LIMIT_EXPIRED = 7;
const drop_reason_t DROP_NO_ROUTE = 8;
// Larger than the MTU of its instance or path; an ICMP signal was sent.
const drop_reason_t DROP_MTU_EXCEEDED = 9;
// IPv4 without DF larger than the MTU: the switch never fragments.
const drop_reason_t DROP_MTU_EXCEEDED_NO_DF = 10;
// Larger than the MTU, but the ICMP signal meter was red.
const drop_reason_t DROP_ICMP_RATE_LIMITED = 11;
// Larger than the MTU where no signal can be sent from here: Geneve traffic
// (the signal belongs inside the tunnel), packets returned by the SmartNIC,
// ICMP errors and packets from no single host (flow_t.signal_allowed).
const drop_reason_t DROP_MTU_EXCEEDED_NO_SIGNAL = 12;
// Arrived on a port the controller has not given a role.
const drop_reason_t DROP_PORT_ROLE_UNASSIGNED = 13;
// Neither IPv4 nor IPv6 (ARP, LLDP, ...): this is a layer-3 border.
const drop_reason_t DROP_NOT_IP = 14;
// IP version field disagrees with the EtherType.
const drop_reason_t DROP_IP_VERSION_MISMATCH = 15;
// Any other parser error. None is reachable with this parser (the Geneve
// option stack is as deep as the 6-bit option length allows); the reason
// exists so that a future parser change cannot drop packets silently.
const drop_reason_t DROP_PARSER_ERROR = 16;
// The IP header claims more bytes than the frame carries. Such a length is
// spoofed: it would make a small packet look oversized (an ICMP signal for
// free) or large to the elephant sketch.
const drop_reason_t DROP_IP_LENGTH_PAST_FRAME = 17;

#endif
