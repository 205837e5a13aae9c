/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-nic's own Prometheus endpoint (--metrics): its data path
 * without a controller, from the same totals as GetStats and telemetry
 * (nic_control_stats). Names start jumbogate_nic_; the controller's view
 * of the same SmartNIC (read through GetStats) is jumbogate_smartnic_*
 * (docs/operations.md).
 */
#include "metrics.h"

#include <rte_common.h>

#include "control.h"
#include "metrics_http.h"

static void one(struct jg_metrics_text *text, const char *name,
		const char *type, const char *help, uint64_t value)
{
	jg_metric_family(text, name, type, help);
	jg_metric_sample(text, name, value, NULL);
}

static void pair(struct jg_metrics_text *text, const char *name,
		 const char *help, const char *label, const char *first,
		 uint64_t first_value, const char *second,
		 uint64_t second_value)
{
	const char *a[] = {label, first, NULL};
	const char *b[] = {label, second, NULL};

	jg_metric_family(text, name, "counter", help);
	jg_metric_sample(text, name, first_value, a);
	jg_metric_sample(text, name, second_value, b);
}

void nic_metrics_render(struct jg_metrics_text *text, void *unused)
{
	struct nic_totals totals;
	const struct jg_merge_stats *merge;
	const char *reason;

	(void)unused;
	/* The workers answer within --command-timeout-ms; a scrape that
	 * gets no answer says so instead of showing stale figures. */
	if (nic_control_stats(&totals).status != NIC_STATUS_OK) {
		one(text, "jumbogate_nic_stats_ok", "gauge",
		    "1 when the workers answered this scrape", 0);
		return;
	}
	one(text, "jumbogate_nic_stats_ok", "gauge",
	    "1 when the workers answered this scrape", 1);
	merge = &totals.engine.merge;
	pair(text, "jumbogate_nic_packets_total", "packets through the ports",
	     "direction", "in", totals.counters.rx_packets, "out",
	     totals.counters.tx_packets);
	pair(text, "jumbogate_nic_bytes_total", "bytes through the ports",
	     "direction", "in", totals.counters.rx_bytes, "out",
	     totals.counters.tx_bytes);
	one(text, "jumbogate_nic_held_packets", "gauge",
	    "segments held for merging and datagrams held for caravans now",
	    totals.held);
	one(text, "jumbogate_nic_bypassed_packets_total", "counter",
	    "packets neither merged nor split (not inbound or outbound)",
	    totals.counters.bypassed);
	one(text, "jumbogate_nic_merged_packets_total", "counter",
	    "merged packets sent", merge->merged_packets);
	one(text, "jumbogate_nic_segments_merged_total", "counter",
	    "segments that went into merged packets", totals.segments_merged);
	one(text, "jumbogate_nic_split_packets_total", "counter",
	    "packets split to the path MTU",
	    totals.engine.split.packets_segmented);
	one(text, "jumbogate_nic_split_segments_total", "counter",
	    "segments the splits made", totals.engine.split.segments_out);
	pair(text, "jumbogate_nic_caravans_total",
	     "UDP caravans packed and unpacked", "action", "packed",
	     totals.engine.caravan.caravans_packed, "unpacked",
	     totals.engine.caravan.caravans_unpacked);
	one(text, "jumbogate_nic_flows", "gauge", "flows in the flow tables",
	    totals.engine.flows_now);
	one(text, "jumbogate_nic_flows_evicted_total", "counter",
	    "flows evicted from a full table", merge->flows_evicted);
	one(text, "jumbogate_nic_onloads_refused_total", "counter",
	    "onloads refused past --max-onloaded-flows",
	    merge->onloads_refused);
	jg_metric_family(text, "jumbogate_nic_drop_packets_total", "counter",
			 "packets dropped, by reason");
	for (unsigned int i = 0; (reason = nic_drop_reason_name(i)); i++) {
		const char *labels[] = {"reason", reason, NULL};
		jg_metric_sample(text, "jumbogate_nic_drop_packets_total",
				 nic_drop_count(&totals, i), labels);
	}
	one(text, "jumbogate_nic_commands_abandoned_total", "counter",
	    "control requests the workers did not answer in time",
	    totals.counters.commands_abandoned);
}
