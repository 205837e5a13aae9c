/* SPDX-License-Identifier: Apache-2.0 */
/*
 * V1ModelIngress and V1ModelEgress of p4src/v1model/jumbogate.p4 in C, and
 * the pipeline's set-up. The parsers and controls they call are in one
 * file per P4 file (pipeline_<name>.c for p4src/include/<name>.p4, see
 * pipeline_internal.h); every function says which parser, control or
 * table it is. Steering and the elephant sketch run before
 * MtuEnforcement, as in the P4, all three reading JumboPolicy's limit
 * (over_limit). Where the P4 applies its first lookups to every packet (on
 * Tofino they share the first stages), the C applies a control only to the
 * packets whose result is read; what leaves is the same.
 */
#include "pipeline_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_hash_crc.h>

/* -- V1ModelIngress and V1ModelEgress
 * ---------------------------------------------- */

int sw_pipeline_run(struct sw_pipeline *pipeline, unsigned int worker,
		    uint8_t *frame, uint32_t *length, uint16_t ingress_port,
		    uint64_t now_ns)
{
	const struct sw_tables *tables = &pipeline->tables;
	struct sw_counters *counters = &pipeline->counters[worker];
	struct headers hdr;
	struct metadata meta;
	/* meta.flow packed as merge_flows matches it and the elephant sketch
	 * hashes it, once for both (sw_flow_key). */
	uint8_t flow_key[SW_KEY_MAX];
	struct parser parser = {frame, *length, pipeline->parse_depth_bytes,
				&meta.parsing};
	enum parser_error error;
	bool held_to_mtu = false; /* the MTU policy holds for the packet */
	int egress = -1;

	memset(&meta, 0, sizeof(meta));
	memset(&hdr, 0xff, sizeof(hdr)); /* every header invalid (NONE) */
	error = sw_jumbogate_parser(&parser, &hdr);
	meta.drop_reason = P4_DROP_NONE;
	meta.signal_kind = P4_SIGNAL_NONE;
	meta.steer_reason = P4_STEER_NONE;

	/* In the P4's order. What the P4 applies to every packet, the C
	 * skips where nothing reads it: a packet the port's role or the
	 * parser already dropped has no flow to classify or police. */
	sw_port_roles(tables, ingress_port, &meta);
	if (meta.port_role != P4_PORT_ROLE_UNASSIGNED)
		sw_parse_verdict(frame, *length, &hdr, &meta, error);
	if (meta.drop_reason == P4_DROP_NONE)
		sw_flow_classifier(frame, &hdr, &meta);
	sw_nic_port(tables, &meta);
	if (meta.drop_reason == P4_DROP_NONE)
		sw_jumbo_policy(tables, &meta);
	/* The MTU policy holds for fully parsed traffic from outside, from
	 * the rack and back from the SmartNIC, path probes aside. */
	if (meta.drop_reason == P4_DROP_NONE && !meta.parsing.depth_exceeded &&
	    (meta.port_role == P4_PORT_ROLE_EXTERNAL ||
	     meta.port_role == P4_PORT_ROLE_INTERNAL ||
	     meta.port_role == P4_PORT_ROLE_NIC))
		sw_path_probes(&meta, &held_to_mtu);
	if (meta.drop_reason == P4_DROP_NONE && meta.parsing.depth_exceeded)
		sw_depth_policy(tables, &meta);
	if (meta.port_role == P4_PORT_ROLE_UNASSIGNED)
		meta.drop_reason = P4_DROP_PORT_ROLE_UNASSIGNED;
	/* Steering and the elephant sketch before MtuEnforcement, as in the
	 * P4: they read what JumboPolicy found (over_limit), not what
	 * MtuEnforcement decides. */
	sw_flow_key(&meta.flow, flow_key);
	sw_steering(tables, &meta, flow_key, held_to_mtu, now_ns);
	if (meta.elephant_candidate)
		sw_elephant_detector(pipeline, worker, &meta, flow_key, now_ns,
				     *length);
	sw_mtu_enforcement(pipeline, ingress_port, &meta, held_to_mtu, now_ns);
	if (meta.drop_reason == P4_DROP_NONE) {
		if (meta.steer_reason != P4_STEER_NONE)
			egress = meta.nic_port;
		else
			egress = sw_routing(tables, frame, &hdr, &meta);
	}
	sw_ingress_counters(counters, ingress_port, &meta, *length);

	if (meta.signal_kind != P4_SIGNAL_NONE) {
		/* The original is dropped; its resubmitted copy becomes the
		 * ICMP error, counted at its original length as BMv2 does. */
		uint32_t original = *length;
		uint32_t signal_length =
			sw_signal_builder(tables, frame, *length, &meta);

		if (signal_length == 0)
			return -1;
		sw_count(
			&counters->icmp_signals
				 [meta.signal_kind == P4_SIGNAL_IPV4_FRAG_NEEDED
					  ? P4_ICMP_COUNTER_IPV4_FRAG_NEEDED
					  : P4_ICMP_COUNTER_IPV6_PACKET_TOO_BIG],
			original);
		*length = signal_length;
		egress = meta.signal_reply_port;
	} else if (meta.drop_reason != P4_DROP_NONE || egress == DROP_PORT) {
		return -1;
	}
	/* control EgressCounters */
	sw_count(&counters->port_tx[egress % P4_PORT_COUNTER_SIZE], *length);
	return egress;
}

/* -- set-up
 * ------------------------------------------------------------------------ */

static void free_hop_sets(struct sw_tables *tables)
{
	for (size_t i = 0; i < RTE_DIM(tables->next_hops); i++) {
		free(tables->next_hops[i]);
		tables->next_hops[i] = NULL;
	}
}

/* A default action's argument by parameter name: its last `bytes` bytes,
 * zeros when the action has no such parameter. */
static const uint8_t *arg_bytes(const struct p4_default_arg *args,
				uint32_t count, const char *param,
				uint32_t bytes)
{
	static const uint8_t zero[16];

	for (uint32_t i = 0; i < count; i++)
		if (strcmp(args[i].param, param) == 0)
			return args[i].value + 16 - bytes;
	return zero + 16 - bytes;
}

static uint64_t arg_u64(const struct p4_default_arg *args, uint32_t count,
			const char *param)
{
	const uint8_t *bytes = arg_bytes(args, count, param, 8);
	uint64_t value = 0;

	for (int i = 0; i < 8; i++)
		value = value << 8 | bytes[i];
	return value;
}

#define SAME(a, b) (strcmp((a), (b)) == 0)

void sw_set_default(struct sw_tables *tables, const char *table,
		    const char *action, const struct p4_default_arg *args,
		    uint32_t count)
{
	if (SAME(table, P4_TABLE_DEPTH_POLICY)) {
		tables->depth_forward =
			SAME(action, P4_ACTION_FORWARD_TOO_DEEP);
	} else if (SAME(table, P4_TABLE_NIC_PORT)) {
		tables->nic_port =
			SAME(action, P4_ACTION_SET_NIC_PORT)
				? (int32_t)arg_u64(args, count,
						   P4_PARAM_SET_NIC_PORT_PORT)
				: -1;
	} else if (SAME(table, P4_TABLE_FLEET_POLICY)) {
		tables->fleet_jumbo =
			arg_u64(args, count,
				P4_PARAM_SET_FLEET_JUMBO_ENABLED) != 0;
		tables->guest_jumbo_mtu = (uint16_t)arg_u64(
			args, count, P4_PARAM_SET_FLEET_JUMBO_GUEST_JUMBO_MTU);
		tables->default_mtu = (uint16_t)arg_u64(
			args, count, P4_PARAM_SET_FLEET_JUMBO_DEFAULT_MTU);
	} else if (SAME(table, P4_TABLE_PATH_MTU_V4)) {
		tables->path_mtu_default_v4 = (uint16_t)arg_u64(
			args, count, P4_PARAM_SET_PATH_MTU_MTU);
	} else if (SAME(table, P4_TABLE_PATH_MTU_V6)) {
		tables->path_mtu_default_v6 = (uint16_t)arg_u64(
			args, count, P4_PARAM_SET_PATH_MTU_MTU);
	} else if (SAME(table, P4_TABLE_ELEPHANT_CONFIG)) {
		tables->elephant_threshold = (uint32_t)arg_u64(
			args, count, P4_PARAM_SET_ELEPHANT_THRESHOLD_BYTES);
	} else if (SAME(table, P4_TABLE_SIGNAL_SOURCE)) {
		tables->signal.configured =
			SAME(action, P4_ACTION_SET_SIGNAL_SOURCE);
		memcpy(tables->signal.ipv4,
		       arg_bytes(args, count, P4_PARAM_SET_SIGNAL_SOURCE_IPV4,
				 sizeof(tables->signal.ipv4)),
		       sizeof(tables->signal.ipv4));
		memcpy(tables->signal.ipv6,
		       arg_bytes(args, count, P4_PARAM_SET_SIGNAL_SOURCE_IPV6,
				 sizeof(tables->signal.ipv6)),
		       sizeof(tables->signal.ipv6));
	}
}

void sw_tables_reset(struct sw_pipeline *pipeline)
{
	struct sw_tables *tables = &pipeline->tables;

	memset(tables->port_role, P4_PORT_ROLE_UNASSIGNED,
	       sizeof(tables->port_role));
	/* The program's default actions, as the compile has them. */
	for (int i = 0; i < P4_TABLE_COUNT; i++) {
		const struct p4_table_shape *shape = &p4_table_shapes[i];

		if (shape->default_action != NULL && !shape->const_default)
			sw_set_default(
				tables, shape->alias, shape->default_action,
				shape->default_args, shape->default_arg_count);
	}
	sw_hash_clear(&tables->instances_v4);
	sw_hash_clear(&tables->instances_v6);
	sw_lpm_clear(&tables->path_mtu_v4);
	sw_lpm_clear(&tables->path_mtu_v6);
	sw_hash_clear(&tables->merge_flows);
	sw_ternary_set(&tables->merge_services, NULL, 0);
	sw_lpm_clear(&tables->routes_v4);
	sw_lpm_clear(&tables->routes_v6);
	free_hop_sets(tables);
	for (int i = 0; i < P4_ICMP_METER_SIZE; i++)
		sw_meter_set(&pipeline->icmp_signal_meter[i], 0, 0, 0, 0, 0);
	for (int i = 0; i < P4_ICMP_SOURCE_METER_SIZE; i++)
		sw_meter_set(&pipeline->icmp_source_meter[i], 0, 0, 0, 0, 0);
}

int sw_pipeline_init(struct sw_pipeline *pipeline, uint32_t parse_depth,
		     uint16_t cpu_port, uint64_t now_ns)
{
	struct sw_tables *tables = &pipeline->tables;
	uint32_t seed = sw_random_seed();
	int result = 0;

	sw_init_crc_tables();
	memset(pipeline, 0, sizeof(*pipeline));
	pipeline->parse_depth_bytes = parse_depth;
	pipeline->cpu_port = cpu_port;
	pipeline->start_ns = now_ns;
	/* Sizes and key lengths are the P4 program's (p4_tables.h). */
	result |= sw_hash_init(&tables->instances_v4,
			       P4_TABLE_INSTANCES_V4_KEY_BYTES,
			       P4_TABLE_INSTANCES_V4_SIZE, seed);
	result |= sw_hash_init(&tables->instances_v6,
			       P4_TABLE_INSTANCES_V6_KEY_BYTES,
			       P4_TABLE_INSTANCES_V6_SIZE, seed);
	result |= sw_lpm_init(&tables->path_mtu_v4,
			      P4_TABLE_PATH_MTU_V4_KEY_BYTES,
			      P4_TABLE_PATH_MTU_V4_SIZE, seed);
	result |= sw_lpm_init(&tables->path_mtu_v6,
			      P4_TABLE_PATH_MTU_V6_KEY_BYTES,
			      P4_TABLE_PATH_MTU_V6_SIZE, seed);
	result |= sw_hash_init(&tables->merge_flows, SW_FLOW_KEY_LEN,
			       P4_TABLE_MERGE_FLOWS_SIZE, seed);
	result |= sw_ternary_init(&tables->merge_services,
				  P4_TABLE_MERGE_SERVICES_SIZE);
	result |= sw_lpm_init(&tables->routes_v4, P4_TABLE_ROUTES_V4_KEY_BYTES,
			      P4_TABLE_ROUTES_V4_SIZE, seed);
	result |= sw_lpm_init(&tables->routes_v6, P4_TABLE_ROUTES_V6_KEY_BYTES,
			      P4_TABLE_ROUTES_V6_SIZE, seed);
	if (result != 0) {
		sw_pipeline_free(pipeline);
		return -ENOMEM;
	}
	sw_tables_reset(pipeline);
	return 0;
}

void sw_pipeline_free(struct sw_pipeline *pipeline)
{
	struct sw_tables *tables = &pipeline->tables;

	sw_hash_free(&tables->instances_v4);
	sw_hash_free(&tables->instances_v6);
	sw_lpm_free(&tables->path_mtu_v4);
	sw_lpm_free(&tables->path_mtu_v6);
	sw_hash_free(&tables->merge_flows);
	sw_ternary_free(&tables->merge_services);
	sw_lpm_free(&tables->routes_v4);
	sw_lpm_free(&tables->routes_v6);
	free_hop_sets(tables);
}
