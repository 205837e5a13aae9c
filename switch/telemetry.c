/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch's DPDK telemetry (dpdk-telemetry.py, or the socket in
 * /var/run/dpdk/PREFIX/dpdk_telemetry.v2), for an operator looking at one
 * switch without a P4Runtime client:
 *
 *   /jumbogate_switch/stats    the totals the exit line prints, the drop
 *                              reasons by name, the control queues' depths
 *   /jumbogate_switch/ports    per P4 port: its interface, packets and bytes
 *                              in and out (the port_rx / port_tx counters)
 *   /jumbogate_switch/buffers  buffers of each pool outside it
 *   /jumbogate_switch/writes   accepted P4Runtime write updates per
 *                              election id (p4rt_writes.h)
 *
 * (DPDK takes letters, digits, '_' and '/' in a command: hence
 * jumbogate_switch.) The counters are the P4 program's own (what P4Runtime
 * reads), summed over the workers as they run: a reading is a moment, not a
 * snapshot.
 */
#include "telemetry.h"

#include <stdio.h>

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_telemetry.h>

#include "pool_telemetry.h"

static const struct sw_switch *telemetry_switch;

void sw_totals(const struct sw_switch *sw, struct sw_totals *totals)
{
	*totals = (struct sw_totals){0};
	for (unsigned int w = 0; w < sw->worker_count; w++) {
		const struct sw_internal_counters *c =
			&sw->pipeline.internal[w];

		totals->internal.digests_lost += c->digests_lost;
		totals->internal.tx_dropped += c->tx_dropped;
		totals->internal.packet_in_lost += c->packet_in_lost;
		totals->internal.multi_segment_dropped +=
			c->multi_segment_dropped;
	}
	for (uint32_t i = 0; i < P4_PORT_COUNTER_SIZE; i++) {
		totals->packets_in +=
			sw_counter_read(&sw->pipeline, sw->worker_count,
					SW_COUNTER_PORT_RX, i)
				.packets;
		totals->packets_out +=
			sw_counter_read(&sw->pipeline, sw->worker_count,
					SW_COUNTER_PORT_TX, i)
				.packets;
	}
}

static int stats_command(const char *command, const char *params,
			 struct rte_tel_data *d)
{
	static const char *const reason_names[] = P4_DROP_REASON_NAMES;
	const struct sw_switch *sw = telemetry_switch;
	struct rte_tel_data *drops;
	struct sw_totals totals;

	(void)command;
	(void)params;
	sw_totals(sw, &totals);
	rte_tel_data_start_dict(d);
	jg_tel_u64(d, "packets_in", totals.packets_in);
	jg_tel_u64(d, "packets_out", totals.packets_out);
	jg_tel_u64(d, "tx_dropped", totals.internal.tx_dropped);
	jg_tel_u64(d, "digests_lost", totals.internal.digests_lost);
	jg_tel_u64(d, "packet_in_lost", totals.internal.packet_in_lost);
	jg_tel_u64(d, "multi_segment_dropped",
		   totals.internal.multi_segment_dropped);
	jg_tel_u64(d, "digests_queued", rte_ring_count(sw->digests));
	jg_tel_u64(d, "packet_in_queued", rte_ring_count(sw->packet_in));
	jg_tel_u64(d, "packet_out_queued", rte_ring_count(sw->packet_out));
	jg_tel_u64(d, "stream_messages_dropped",
		   sw_p4rt_stream_messages_dropped());
	jg_tel_u64(d, "stream_outbox_bytes", sw_p4rt_stream_outbox_bytes());
	jg_tel_u64(d, "digests_dropped", sw_p4rt_digests_dropped());
	jg_tel_u64(d, "streams_open", sw_p4rt_streams_open());
	jg_tel_u64(d, "streams_refused", sw_p4rt_streams_refused());
	jg_tel_u64(d, "streams_unarbitrated", sw_p4rt_streams_unarbitrated());
	jg_tel_u64(d, "streams_unarbitrated_closed",
		   sw_p4rt_streams_unarbitrated_closed());
	jg_tel_u64(d, "reads_refused", sw_p4rt_reads_refused());
	jg_tel_u64(d, "roles", sw_p4rt_roles());
	jg_tel_u64(d, "roles_refused", sw_p4rt_roles_refused());
	jg_tel_u64(d, "role_denials", sw_p4rt_role_denials());
	jg_tel_u64(d, "packet_outs_refused", sw_p4rt_packet_outs_refused());
	jg_tel_u64(d, "multicast_groups_refused",
		   sw_p4rt_multicast_groups_refused());
	jg_tel_u64(d, "clone_sessions_refused",
		   sw_p4rt_clone_sessions_refused());
	jg_tel_u64(d, "replicas_refused", sw_p4rt_replicas_refused());
	drops = rte_tel_data_alloc();
	if (drops == NULL)
		return 0;
	rte_tel_data_start_dict(drops);
	for (uint32_t r = 1; r < RTE_DIM(reason_names); r++) {
		struct sw_packets_bytes count;

		if (reason_names[r] == NULL)
			continue;
		count = sw_counter_read(&sw->pipeline, sw->worker_count,
					SW_COUNTER_DROP_REASONS, r);
		jg_tel_u64(drops, reason_names[r], count.packets);
	}
	rte_tel_data_add_dict_container(d, "drops", drops, 0);
	return 0;
}

static int ports_command(const char *command, const char *params,
			 struct rte_tel_data *d)
{
	const struct sw_switch *sw = telemetry_switch;

	(void)command;
	(void)params;
	rte_tel_data_start_dict(d);
	for (unsigned int i = 0; i < sw->port_count; i++) {
		const struct sw_port *port = &sw->ports[i];
		struct rte_tel_data *entry = rte_tel_data_alloc();
		struct sw_packets_bytes rx, tx;
		char key[16];

		if (entry == NULL)
			return 0;
		rx = sw_counter_read(&sw->pipeline, sw->worker_count,
				     SW_COUNTER_PORT_RX, port->p4_port);
		tx = sw_counter_read(&sw->pipeline, sw->worker_count,
				     SW_COUNTER_PORT_TX, port->p4_port);
		rte_tel_data_start_dict(entry);
		rte_tel_data_add_dict_string(entry, "interface", port->name);
		jg_tel_u64(entry, "rx_packets", rx.packets);
		jg_tel_u64(entry, "rx_bytes", rx.bytes);
		jg_tel_u64(entry, "tx_packets", tx.packets);
		jg_tel_u64(entry, "tx_bytes", tx.bytes);
		snprintf(key, sizeof(key), "%u", port->p4_port);
		rte_tel_data_add_dict_container(d, key, entry, 0);
	}
	return 0;
}

static int writes_command(const char *command, const char *params,
			  struct rte_tel_data *d)
{
	(void)command;
	(void)params;
	sw_p4rt_writes_telemetry(d);
	return 0;
}

void sw_telemetry_register(const struct sw_switch *sw)
{
	telemetry_switch = sw;
	jg_telemetry_register("jumbogate-switch", "/jumbogate_switch/stats",
			      stats_command,
			      "jumbogate-switch: totals, drops by reason, "
			      "control queues");
	jg_telemetry_register(
		"jumbogate-switch", "/jumbogate_switch/ports", ports_command,
		"jumbogate-switch: packets and bytes per P4 port");
	jg_telemetry_register("jumbogate-switch", "/jumbogate_switch/writes",
			      writes_command,
			      "jumbogate-switch: accepted P4Runtime write "
			      "updates per election id");
	jg_telemetry_register_buffers("/jumbogate_switch/buffers",
				      "jumbogate-switch");
}
