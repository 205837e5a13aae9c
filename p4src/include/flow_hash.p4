// What the elephant sketch and its Bloom filter hash (elephant.p4; the
// state lives in each target's sketch.p4, which includes this file).
#ifndef JUMBOGATE_FLOW_HASH_P4
#define JUMBOGATE_FLOW_HASH_P4

#include "headers.p4"

// Hash salts: one per sketch row and Bloom hash, so the indices differ.
const bit<8> SALT_ROW0 = 0x11;
const bit<8> SALT_ROW1 = 0x5a;
const bit<8> SALT_ROW2 = 0xc3;
const bit<8> SALT_BLOOM0 = 0x27;
const bit<8> SALT_BLOOM1 = 0x9e;

// What the sketch and the Bloom filter hash: the flow's 5-tuple and a salt.
#define FLOW_HASH_FIELDS(salt, flow) { salt, flow.ip_version, flow.src_addr, \
    flow.dst_addr, flow.protocol, flow.src_port, flow.dst_port }

#endif
