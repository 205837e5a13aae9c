/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Statistics through DPDK's telemetry socket, so that dpdk-telemetry.py
 * and any tool speaking its protocol read the same numbers as GetStats:
 *
 *   /jumbogate/stats   totals, the accounting identity's terms, drops
 *   /jumbogate/delay   merge-delay histogram (upper bound us -> count)
 *   /jumbogate/caravan_delay  the same for datagrams in caravan holds
 *   /jumbogate/info    boot id, workers, ports
 *   /jumbogate/buffers buffers of each pool outside it (in rings, caches,
 *                      engines or in flight), to see that none leak
 *   /jumbogate/pathmtu path MTU discovery counters
 *   /jumbogate/paths   its destinations (the first TELEMETRY_PATHS)
 *   /jumbogate/queues  queues, the workers serving them, the scaler's
 *                      last sample; ",N" gives the queues to N workers,
 *                      ",W0,W1,..." queue q to worker Wq, ",auto" hands
 *                      the choice back to the scaler
 */
#include "telemetry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mempool.h>
#include <rte_telemetry.h>

#include "control.h"
#include "pool_telemetry.h"
#include "scaling.h"

static void add_u64(struct rte_tel_data *d, const char *name, uint64_t value)
{
	rte_tel_data_add_dict_u64(d, name, value);
}

static int stats_command(const char *command, const char *params,
			 struct rte_tel_data *d)
{
	const struct jg_merge_stats *merge;
	struct nic_totals totals;
	struct nic_result result;
	const char *reason;
	char yield[32];

	(void)command;
	(void)params;
	result = nic_control_stats(&totals);
	if (result.status != NIC_STATUS_OK)
		return -1;
	merge = &totals.engine.merge;
	rte_tel_data_start_dict(d);
	add_u64(d, "packets_in", totals.counters.rx_packets);
	add_u64(d, "bytes_in", totals.counters.rx_bytes);
	add_u64(d, "rx_bursts", totals.counters.rx_bursts);
	add_u64(d, "packets_out", totals.counters.tx_packets);
	add_u64(d, "bytes_out", totals.counters.tx_bytes);
	add_u64(d, "packets_held", totals.held);
	add_u64(d, "packets_dropped", totals.dropped);
	add_u64(d, "packets_absorbed", totals.absorbed);
	add_u64(d, "packets_created", totals.created);
	add_u64(d, "packets_bypassed", totals.counters.bypassed);
	add_u64(d, "merge_packets_in", merge->packets_in);
	add_u64(d, "merged_packets", merge->merged_packets);
	add_u64(d, "segments_merged", totals.segments_merged);
	add_u64(d, "merge_passed_through", merge->passed_through);
	add_u64(d, "merge_deadline_flushes", merge->deadline_flushes);
	add_u64(d, "merge_delayed_flows", merge->delayed_flows);
	add_u64(d, "merge_delay_sum_ns", merge->delay_sum_ns);
	add_u64(d, "merge_bad_checksum_passes", merge->bad_checksum_passes);
	add_u64(d, "merge_overlap_passes", merge->overlap_passes);
	add_u64(d, "merge_overlap_restarts", merge->overlap_restarts);
	add_u64(d, "merge_legacy_mss_passes", merge->legacy_mss_passes);
	add_u64(d, "merge_held_full_passes", merge->held_full_passes);
	add_u64(d, "merge_mss_raised", merge->mss_raised);
	add_u64(d, "split_packets_in", totals.engine.split.packets_in);
	add_u64(d, "split_packets", totals.engine.split.packets_segmented);
	add_u64(d, "split_segments_out", totals.engine.split.segments_out);
	add_u64(d, "split_peer_mss_limited",
		totals.engine.split.peer_mss_limited);
	add_u64(d, "caravans_packed", totals.engine.caravan.caravans_packed);
	add_u64(d, "caravan_held", totals.counters.caravan_held_now);
	add_u64(d, "caravan_hold_full_packs",
		totals.counters.caravan_hold_full_packs);
	add_u64(d, "caravan_hold_delay_sum_ns",
		totals.counters.caravan_hold_delay_sum_ns);
	add_u64(d, "datagrams_packed", totals.engine.caravan.datagrams_packed);
	add_u64(d, "caravans_unpacked",
		totals.engine.caravan.caravans_unpacked);
	add_u64(d, "datagrams_unpacked",
		totals.engine.caravan.datagrams_unpacked);
	add_u64(d, "flows_active", totals.engine.flows_now);
	add_u64(d, "flows_evicted", merge->flows_evicted);
	add_u64(d, "onloads_refused", merge->onloads_refused);
	add_u64(d, "pins_expired", merge->pins_expired);
	add_u64(d, "merge_connection_resets", merge->connection_resets);
	add_u64(d, "worker_polls", totals.counters.polls);
	add_u64(d, "worker_idle_sleeps", totals.counters.idle_sleeps);
	add_u64(d, "worker_commands", totals.counters.commands);
	add_u64(d, "worker_commands_abandoned",
		totals.counters.commands_abandoned);
	/* Telemetry of DPDK 22.11 has no floating-point values. */
	snprintf(yield, sizeof(yield), "%.6f", totals.conversion_yield);
	rte_tel_data_add_dict_string(d, "conversion_yield", yield);
	/* Flat keys: nested dictionaries are not readable by every
	 * telemetry client of DPDK 22.11. */
	for (unsigned int i = 0; (reason = nic_drop_reason_name(i)); i++) {
		char key[64];

		snprintf(key, sizeof(key), "drop_%s", reason);
		for (char *c = key; *c; c++)
			if (*c == '-')
				*c = '_';
		add_u64(d, key, nic_drop_count(&totals, i));
	}
	return 0;
}

/* A delay histogram as le_1 ... le_inf: upper bound in us -> count. */
static void
add_delay_histogram(struct rte_tel_data *d,
		    const uint64_t buckets[JG_DELAY_HISTOGRAM_BUCKETS])
{
	rte_tel_data_start_dict(d);
	for (unsigned int b = 0; b < JG_DELAY_HISTOGRAM_BUCKETS; b++) {
		double upper = nic_delay_bucket_upper_us(b);
		char name[32];

		if (isinf(upper))
			snprintf(name, sizeof(name), "le_inf");
		else
			snprintf(name, sizeof(name), "le_%.0f", upper);
		add_u64(d, name, buckets[b]);
	}
}

static int delay_command(const char *command, const char *params,
			 struct rte_tel_data *d)
{
	struct nic_totals totals;

	(void)params;
	if (nic_control_stats(&totals).status != NIC_STATUS_OK)
		return -1;
	if (strcmp(command, "/jumbogate/caravan_delay") == 0)
		add_delay_histogram(d, totals.counters.caravan_hold_delay_us);
	else
		add_delay_histogram(d, totals.engine.merge.delay_histogram_us);
	return 0;
}

static int info_command(const char *command, const char *params,
			struct rte_tel_data *d)
{
	struct nic_info_view info;
	struct rte_tel_data *ports;
	char boot_id[32];

	(void)command;
	(void)params;
	nic_control_info(&info);
	rte_tel_data_start_dict(d);
	/* As a string: JSON readers lose precision on 64-bit integers. */
	snprintf(boot_id, sizeof(boot_id), "%llu",
		 (unsigned long long)info.boot_id);
	rte_tel_data_add_dict_string(d, "boot_id", boot_id);
	rte_tel_data_add_dict_string(d, "version", JUMBOGATE_NIC_VERSION);
	add_u64(d, "workers", info.workers);
	add_u64(d, "uptime_ms", (uint64_t)(info.uptime_s * 1000));
	ports = rte_tel_data_alloc();
	if (ports) {
		rte_tel_data_start_array(ports, RTE_TEL_STRING_VAL);
		for (unsigned int p = 0; p < info.port_count; p++)
			rte_tel_data_add_array_string(ports, info.ports[p]);
		rte_tel_data_add_dict_container(d, "ports", ports, 0);
	}
	return 0;
}

/* A telemetry dict holds at most RTE_TEL_MAX_DICT_ENTRIES (256) keys. */
#define TELEMETRY_PATHS 128

static void add_counter(void *d, const char *name, uint64_t value)
{
	add_u64(d, name, value);
}

static int pathmtu_command(const char *command, const char *params,
			   struct rte_tel_data *d)
{
	(void)command;
	(void)params;
	rte_tel_data_start_dict(d);
	add_u64(d, "enabled", nic_control_pmtu_counters(add_counter, d));
	return 0;
}

/* Telemetry containers nest one level only, so the destinations are a
 * command of their own: index -> {address, mtu, method, exact, probing,
 * age, rtt} (telemetry names allow no dots or colons: the address is a value).
 */
static int paths_command(const char *command, const char *params,
			 struct rte_tel_data *d)
{
	size_t count = 0;
	bool enabled = false;
	struct nic_learned_path *paths =
		nic_control_learned_paths(&count, &enabled);

	(void)command;
	(void)params;
	rte_tel_data_start_dict(d);
	for (size_t i = 0; i < count && i < TELEMETRY_PATHS; i++) {
		struct rte_tel_data *path = rte_tel_data_alloc();
		char index[16];

		if (path == NULL)
			break;
		rte_tel_data_start_dict(path);
		rte_tel_data_add_dict_string(path, "address", paths[i].address);
		add_u64(path, "mtu", paths[i].mtu);
		rte_tel_data_add_dict_string(path, "method", paths[i].method);
		add_u64(path, "exact", paths[i].exact);
		add_u64(path, "probing", paths[i].probing);
		add_u64(path, "age_ms", (uint64_t)(paths[i].age_s * 1000));
		add_u64(path, "rtt_us", (uint64_t)(paths[i].rtt_ms * 1000));
		snprintf(index, sizeof(index), "%zu", i);
		rte_tel_data_add_dict_container(d, index, path, 0);
	}
	free(paths);
	return 0;
}

/* "auto", a worker count, or one owner per queue ("1,0,1,0"). */
static bool apply_queues(const char *params)
{
	unsigned int owners[NIC_MAX_QUEUES];
	unsigned int count = 0;
	const char *at = params;

	if (strcmp(params, "auto") == 0) {
		nic_scaling_force(0);
		return true;
	}
	do {
		char *end;
		unsigned long value = strtoul(at, &end, 10);

		if (end == at || (*end != ',' && *end != '\0') ||
		    count == NIC_MAX_QUEUES || value > NIC_MAX_QUEUES)
			return false;
		owners[count++] = (unsigned int)value;
		at = *end == ',' ? end + 1 : end;
	} while (*at != '\0');
	if (count > 1)
		return nic_scaling_pin(owners, count);
	if (owners[0] == 0)
		return false;
	nic_scaling_force(owners[0]);
	return true;
}

static int queues_command(const char *command, const char *params,
			  struct rte_tel_data *d)
{
	struct nic_scaling_view view;

	(void)command;
	if (params != NULL && *params != '\0' && !apply_queues(params))
		return -1;
	nic_scaling_read(&view);
	rte_tel_data_start_dict(d);
	add_u64(d, "queues", view.queues);
	add_u64(d, "workers", view.workers);
	add_u64(d, "target_workers", view.target);
	add_u64(d, "serving_workers", view.serving);
	add_u64(d, "forced_workers", view.forced);
	add_u64(d, "pinned", view.pinned);
	add_u64(d, "scaling", view.scaling);
	add_u64(d, "changes", view.changes);
	add_u64(d, "handovers", view.handovers);
	add_u64(d, "handover_flushed", view.handover_flushed);
	add_u64(d, "packets_per_s", view.packets_per_s);
	add_u64(d, "elephants", view.elephants);
	rte_tel_data_add_dict_string(d, "owners", view.owners);
	return 0;
}

void nic_telemetry_register(void)
{
	jg_telemetry_register("jumbogate-nic", "/jumbogate/queues",
			      queues_command,
			      "jumbogate-nic queues and the workers serving "
			      "them; ,N gives them to N workers, ,auto to "
			      "the scaler");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/pathmtu",
			      pathmtu_command,
			      "jumbogate-nic path MTU discovery counters");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/paths",
			      paths_command,
			      "jumbogate-nic destinations of path MTU "
			      "discovery: index -> address, mtu, method, age");
	jg_telemetry_register_buffers("/jumbogate/buffers", "jumbogate-nic");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/stats",
			      stats_command,
			      "jumbogate-nic totals, accounting and "
			      "drops by reason");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/delay",
			      delay_command,
			      "jumbogate-nic merge-delay histogram, "
			      "bucket upper bound in us -> segments");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/caravan_delay",
			      delay_command,
			      "jumbogate-nic caravan-hold delay histogram, "
			      "bucket upper bound in us -> datagrams");
	jg_telemetry_register("jumbogate-nic", "/jumbogate/info", info_command,
			      "jumbogate-nic boot id, version, workers, "
			      "ports");
}
