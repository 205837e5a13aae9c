// What the elephant sketch and its Bloom filter hash (elephant.p4; the
// state lives in each target's sketch.p4, which includes this file).
#ifndef JUMBOGATE_FLOW_HASH_P4
#define JUMBOGATE_FLOW_HASH_P4

#include "headers.p4"

// The sketch's three rows and the Bloom filter's two cells each need a hash
// whose collisions are its own. A CRC is affine in its message: a salt put
// in front of the same fields changes every flow's hash by one constant, so
// two flows that share one salted hash's cell share every salted hash's cell,
// and three rows count like one. So each hash here is another linear map of
// the flow: another polynomial (crc16 against crc32), or the same fields in
// another order, which puts every field at another distance from the end of
// the message. The crc32 orders below place no field at the same distance
// twice.
//
//   row 0: crc32 of FLOW_FIELDS_FORWARD    Bloom 0: crc16 of FLOW_FIELDS_REVERSED
//   row 1: crc32 of FLOW_FIELDS_REVERSED   Bloom 1: crc32 of FLOW_FIELDS_SHUFFLED
//   row 2: crc16 of FLOW_FIELDS_FORWARD
#define FLOW_FIELDS_FORWARD(flow) { flow.ip_version, flow.src_addr, \
    flow.dst_addr, flow.protocol, flow.src_port, flow.dst_port }
#define FLOW_FIELDS_REVERSED(flow) { flow.dst_port, flow.src_port, \
    flow.protocol, flow.dst_addr, flow.src_addr, flow.ip_version }
#define FLOW_FIELDS_SHUFFLED(flow) { flow.protocol, flow.dst_port, \
    flow.dst_addr, flow.ip_version, flow.src_port, flow.src_addr }

#endif
