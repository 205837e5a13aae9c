/* SPDX-License-Identifier: Apache-2.0 */
/* A small rack for the pipeline's benchmark and C tests (rack_fixture.h). */
#include "rack_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t checksum(const uint8_t *data, int length)
{
	uint32_t sum = 0;

	for (int i = 0; i + 1 < length; i += 2)
		sum += (uint32_t)(data[i] << 8 | data[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

void rack_fixture_frame(uint8_t *frame, bool v6, uint8_t protocol,
			uint16_t sport)
{
	uint8_t *ip = frame + 14, *l4;

	memset(frame, 0, FRAME_BYTES);
	memcpy(frame, "\x00\x00\x00\x00\x00\xfe\x00\x00\x00\x00\xaa\x01", 12);
	if (v6) {
		store16(frame + 12, P4_ETHERTYPE_IPV6);
		ip[0] = 0x60;
		store16(ip + 4, 1460);
		ip[6] = protocol;
		ip[7] = 64;
		memcpy(ip + 8, "\x20\x01\x0d\xb8\x01\x00", 6);
		ip[23] = 0x10;
		memcpy(ip + 24, "\xfd\x00\x00\x01", 4);
		ip[39] = 5;
		l4 = ip + 40;
	} else {
		store16(frame + 12, P4_ETHERTYPE_IPV4);
		ip[0] = 0x45;
		store16(ip + 2, 1500);
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = protocol;
		memcpy(ip + 12, "\xc6\x33\x64\x0a", 4); /* 198.51.100.10 */
		memcpy(ip + 16, "\x0a\x01\x00\x05", 4); /* 10.1.0.5 */
		store16(ip + 10, checksum(ip, 20));
		l4 = ip + 20;
	}
	store16(l4, sport);
	store16(l4 + 2, 443);
	if (protocol == P4_IP_PROTO_UDP) {
		store16(l4 + 4, (uint16_t)(FRAME_BYTES - (l4 - frame)));
	} else {
		l4[12] = 0x50;
		l4[13] = P4_TCP_FLAG_ACK;
	}
}

static void swap(uint8_t *a, uint8_t *b, int bytes)
{
	for (int i = 0; i < bytes; i++) {
		uint8_t t = a[i];

		a[i] = b[i];
		b[i] = t;
	}
}

void rack_fixture_reply(uint8_t *frame, bool v6, uint8_t protocol,
			uint16_t dport)
{
	uint8_t *ip = frame + 14;
	uint8_t *l4 = ip + (v6 ? 40 : 20);

	rack_fixture_frame(frame, v6, protocol, dport);
	if (v6) {
		swap(ip + 8, ip + 24, 16);
	} else {
		swap(ip + 12, ip + 16, 4);
		store16(ip + 10, 0);
		store16(ip + 10, checksum(ip, 20));
	}
	swap(l4, l4 + 2, 2);
}

void rack_fixture_resize(uint8_t *frame, bool v6, uint32_t bytes)
{
	uint8_t *ip = frame + 14;

	if (bytes > FRAME_BYTES)
		memset(frame + FRAME_BYTES, 0x5a, bytes - FRAME_BYTES);
	if (v6) {
		store16(ip + 4, (uint16_t)(bytes - 14 - 40));
	} else {
		store16(ip + 2, (uint16_t)(bytes - 14));
		store16(ip + 10, 0);
		store16(ip + 10, checksum(ip, 20));
	}
}

static struct sw_hop_set *hops(int count, const uint16_t *ports)
{
	struct sw_hop_set *set =
		calloc(1, sizeof(*set) + (size_t)count * sizeof(set->hops[0]));

	set->count = (uint32_t)count;
	for (int i = 0; i < count; i++)
		set->hops[i].port = ports[i];
	return set;
}

#define FLOW_AT(field) P4_TABLE_MERGE_FLOWS_KEY_##field##_OFFSET

void rack_fixture_program(struct sw_pipeline *pipeline, int flows)
{
	struct sw_tables *t = &pipeline->tables;
	static const uint16_t uplinks[] = {PORT_EXTERNAL, PORT_EXTERNAL_2};
	static const uint16_t rack[] = {PORT_INTERNAL};
	uint8_t key[SW_KEY_MAX] = {0};
	uint8_t v4[4] = {10, 1, 0, 0}, v6[16] = {0xfd, 0, 0, 1};
	static const uint8_t anywhere[16];

	t->port_role[PORT_EXTERNAL] = P4_PORT_ROLE_EXTERNAL;
	t->port_role[PORT_EXTERNAL_2] = P4_PORT_ROLE_EXTERNAL;
	t->port_role[PORT_INTERNAL] = P4_PORT_ROLE_INTERNAL;
	t->port_role[PORT_NIC] = P4_PORT_ROLE_NIC;
	t->fleet_jumbo = true;
	t->nic_port = PORT_NIC;
	t->elephant_threshold = 4000000000u;
	memcpy(key, "\x0a\x01\x00\x05", 4);
	sw_hash_put(&t->instances_v4, key, 1, 0);
	memset(key, 0, sizeof(key));
	memcpy(key, "\xfd\x00\x00\x01", 4);
	key[15] = 5;
	sw_hash_put(&t->instances_v6, key, 1, 0);
	sw_lpm_put(&t->routes_v4, v4, 16, 2);
	sw_lpm_put(&t->routes_v6, v6, 32, 2);
	/* The rest of the world over both uplinks, with paths of 1500 bytes
	 * for IPv6 too (the program's default is IPv6's least, 1280, which
	 * would send the instances' 1500-byte packets out to be split). */
	t->path_mtu_default_v6 = 1500;
	sw_lpm_put(&t->routes_v4, anywhere, 0, 1);
	sw_lpm_put(&t->routes_v6, anywhere, 0, 1);
	t->next_hops[1] = hops(2, uplinks);
	t->next_hops[2] = hops(1, rack);
	/* The steering scenarios' flows (source ports 20000..) are onloaded,
	 * TCP and UDP, over IPv4 and IPv6. */
	for (int flow = 0; flow < 4 * flows; flow++) {
		int v = flow / flows % 2, f = flow % flows;
		uint8_t protocol =
			flow < 2 * flows ? P4_IP_PROTO_TCP : P4_IP_PROTO_UDP;

		uint8_t *src = key + FLOW_AT(SRC_ADDR);
		uint8_t *dst = key + FLOW_AT(DST_ADDR);

		/* At the compile's offsets (p4_tables.h), as the
		 * data path packs a packet's flow. */
		memset(key, 0, sizeof(key));
		key[FLOW_AT(IP_VERSION)] = v ? 6 : 4;
		if (v) {
			memcpy(src, "\x20\x01\x0d\xb8\x01\x00", 6);
			src[15] = 0x10;
			memcpy(dst, "\xfd\x00\x00\x01", 4);
			dst[15] = 5;
		} else {
			memcpy(src + 12, "\xc6\x33\x64\x0a", 4);
			memcpy(dst + 12, "\x0a\x01\x00\x05", 4);
		}
		key[FLOW_AT(PROTOCOL)] = protocol;
		store16(key + FLOW_AT(SRC_PORT), (uint16_t)(20000 + f));
		store16(key + FLOW_AT(DST_PORT), 443);
		if (sw_hash_put(&t->merge_flows, key, 0, 0) != 0) {
			fprintf(stderr,
				"merge_flows holds fewer than "
				"%d flows\n",
				4 * flows);
			exit(1);
		}
	}
}
