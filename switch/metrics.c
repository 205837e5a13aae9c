/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch's own Prometheus endpoint (--metrics): the data path's
 * counters without a controller, from the same sources as its telemetry
 * (telemetry.c). Names start jumbogate_switch_; the controller's view of
 * the same switch (read over P4Runtime) is jumbogate_port_* and friends
 * (docs/operations.md).
 */
#include <stdio.h>

#include <rte_common.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "metrics_http.h"
#include "telemetry.h"

static void port_counters(struct jg_metrics_text *text,
			  const struct sw_switch *sw)
{
	jg_metric_family(text, "jumbogate_switch_port_packets_total", "counter",
			 "packets through each P4 port");
	jg_metric_family(text, "jumbogate_switch_port_bytes_total", "counter",
			 "bytes through each P4 port");
	for (unsigned int i = 0; i < sw->port_count; i++) {
		const struct sw_port *port = &sw->ports[i];
		char number[16];

		snprintf(number, sizeof(number), "%u", port->p4_port);
		for (int tx = 0; tx < 2; tx++) {
			struct sw_packets_bytes count = sw_counter_read(
				&sw->pipeline, sw->worker_count,
				tx ? SW_COUNTER_PORT_TX : SW_COUNTER_PORT_RX,
				port->p4_port);
			const char *labels[] = {"port",	     number,
						"interface", port->name,
						"direction", tx ? "tx" : "rx",
						NULL};
			jg_metric_sample(text,
					 "jumbogate_switch_port_packets_total",
					 count.packets, labels);
			jg_metric_sample(text,
					 "jumbogate_switch_port_bytes_total",
					 count.bytes, labels);
		}
	}
}

static void drops(struct jg_metrics_text *text, const struct sw_switch *sw)
{
	static const char *const reason_names[] = P4_DROP_REASON_NAMES;

	jg_metric_family(text, "jumbogate_switch_drop_packets_total", "counter",
			 "packets the P4 program dropped, by reason");
	jg_metric_family(text, "jumbogate_switch_drop_bytes_total", "counter",
			 "bytes the P4 program dropped, by reason");
	for (uint32_t r = 1; r < RTE_DIM(reason_names); r++) {
		struct sw_packets_bytes count;
		const char *labels[] = {"reason", reason_names[r], NULL};

		if (reason_names[r] == NULL)
			continue;
		count = sw_counter_read(&sw->pipeline, sw->worker_count,
					SW_COUNTER_DROP_REASONS, r);
		jg_metric_sample(text, "jumbogate_switch_drop_packets_total",
				 count.packets, labels);
		jg_metric_sample(text, "jumbogate_switch_drop_bytes_total",
				 count.bytes, labels);
	}
}

static void one(struct jg_metrics_text *text, const char *name,
		const char *type, const char *help, uint64_t value)
{
	jg_metric_family(text, name, type, help);
	jg_metric_sample(text, name, value, NULL);
}

static void add_pool(struct rte_mempool *pool, void *arg)
{
	const char *labels[] = {"pool", pool->name, NULL};

	jg_metric_sample(arg, "jumbogate_switch_buffers_in_use",
			 rte_mempool_in_use_count(pool), labels);
}

void sw_metrics_render(struct jg_metrics_text *text, void *arg)
{
	const struct sw_switch *sw = arg;
	struct sw_totals totals;

	sw_totals(sw, &totals);
	port_counters(text, sw);
	drops(text, sw);
	jg_metric_family(text, "jumbogate_switch_lost_packets_total", "counter",
			 "packets the switch itself lost, by where: a full "
			 "transmit ring, a full digest or packet-in queue, a "
			 "multi-segment frame");
	struct {
		const char *where;
		uint64_t count;
	} lost[] = {{"tx", totals.internal.tx_dropped},
		    {"digest", totals.internal.digests_lost},
		    {"packet_in", totals.internal.packet_in_lost},
		    {"multi_segment", totals.internal.multi_segment_dropped}};
	for (unsigned int i = 0; i < RTE_DIM(lost); i++) {
		const char *labels[] = {"where", lost[i].where, NULL};
		jg_metric_sample(text, "jumbogate_switch_lost_packets_total",
				 lost[i].count, labels);
	}
	jg_metric_family(text, "jumbogate_switch_queue_depth", "gauge",
			 "messages waiting for the P4Runtime server, by queue");
	struct {
		const char *queue;
		const struct rte_ring *ring;
	} queues[] = {{"digests", sw->digests},
		      {"packet_in", sw->packet_in},
		      {"packet_out", sw->packet_out}};
	for (unsigned int i = 0; i < RTE_DIM(queues); i++) {
		const char *labels[] = {"queue", queues[i].queue, NULL};
		jg_metric_sample(text, "jumbogate_switch_queue_depth",
				 rte_ring_count(queues[i].ring), labels);
	}
	one(text, "jumbogate_switch_stream_messages_dropped_total", "counter",
	    "stream messages dropped for a client that did not read them",
	    sw_p4rt_stream_messages_dropped());
	one(text, "jumbogate_switch_digests_dropped_total", "counter",
	    "digest lists dropped unsent (no primary, or past the bound)",
	    sw_p4rt_digests_dropped());
	one(text, "jumbogate_switch_p4runtime_streams", "gauge",
	    "P4Runtime streams open", sw_p4rt_streams_open());
	one(text, "jumbogate_switch_p4runtime_streams_refused_total", "counter",
	    "P4Runtime streams refused past the bound",
	    sw_p4rt_streams_refused());
	jg_metric_family(text, "jumbogate_switch_buffers_in_use", "gauge",
			 "buffers of each pool outside it");
	rte_mempool_walk(add_pool, text);
}
