"""Drop reasons of the jumbogate data plane.

Generated from p4src/include/drop_reasons.p4 by jumbogate.p4.dropgen;
do not edit by hand. Values index the `drop_reasons` counter.
"""

import enum


class DropReason(enum.IntEnum):
    NONE = 0
    PARSE_DEPTH_EXCEEDED = 1
    TRUNCATED = 2
    IPV4_IHL_INVALID = 3
    TCP_DATA_OFFSET_INVALID = 4
    GENEVE_OPTIONS_PAST_PACKET = 5
    TTL_EXPIRED = 6
    HOP_LIMIT_EXPIRED = 7
    NO_ROUTE = 8
    MTU_EXCEEDED = 9
    MTU_EXCEEDED_NO_DF = 10
    ICMP_RATE_LIMITED = 11
    MTU_EXCEEDED_NO_SIGNAL = 12
    PORT_ROLE_UNASSIGNED = 13
    NOT_IP = 14
    IP_VERSION_MISMATCH = 15
    PARSER_ERROR = 16
    IP_LENGTH_PAST_FRAME = 17
