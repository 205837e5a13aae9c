/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small rack's tables and its traffic, written straight into the
 * pipeline without P4Runtime: the benchmark (bench/bench_switch.c) and the
 * pipeline's C tests (tests/test_sketch.c) drive sw_pipeline_run with it.
 *
 * Ports: 1 and 2 are uplinks (ECMP, the default route), 3 the rack
 * (10.1.0.0/16, fd00:1::/32), 5 the SmartNIC. Instances 10.1.0.5 and
 * fd00:1::5 have jumbo frames on, as does the fleet.
 */
#ifndef JUMBOGATE_SWITCH_RACK_FIXTURE_H
#define JUMBOGATE_SWITCH_RACK_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline.h"

#define FRAME_BYTES	1514 /* a 1500-byte IP packet */
#define PORT_EXTERNAL	1
#define PORT_EXTERNAL_2 2
#define PORT_INTERNAL	3
#define PORT_NIC	5

/* Ethernet / IPv4 or IPv6 / TCP or UDP, FRAME_BYTES long, from the
 * Internet to an instance, source port `sport`, destination port 443. */
void rack_fixture_frame(uint8_t *frame, bool v6, uint8_t protocol,
			uint16_t sport);
/* The same flow's other direction: from the instance, port 443, to the
 * Internet address, destination port `dport`. */
void rack_fixture_reply(uint8_t *frame, bool v6, uint8_t protocol,
			uint16_t dport);

/* Makes a frame of the two above `bytes` long, as the SmartNIC's merged
 * frames are: its IP length and IPv4 checksum follow, and the bytes past
 * FRAME_BYTES are filled with 0x5a. */
void rack_fixture_resize(uint8_t *frame, bool v6, uint32_t bytes);

/* The tables the controller would write for the rack. Elephant detection
 * is on with a threshold no run reaches (the sketch counts every bypassed
 * TCP packet, as in service). `onloaded` flows of each kind (TCP and UDP,
 * IPv4 and IPv6, source ports 20000 on) are in merge_flows. Exits on
 * failure. */
void rack_fixture_program(struct sw_pipeline *pipeline, int onloaded);

#endif
