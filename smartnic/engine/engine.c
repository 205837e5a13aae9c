/* SPDX-License-Identifier: Apache-2.0 */
/* Engine life cycle, configuration and statistics. */
#include <errno.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf_dyn.h>

#include "internal.h"

#define DEFAULT_MAX_FLOWS	   65536u
#define DEFAULT_MAX_CHAIN_SEGMENTS 16u
#define DEFAULT_MAX_HELD_SEGMENTS  65536u
#define DEFAULT_MAX_DELAY_US	   300u
#define DEFAULT_CARAVAN_DSCP	   43u
#define READY_QUEUE_SLACK	   4096u
#define MIN_INTERNAL_MTU	   1280u
#define DEFAULT_ONLOAD_IDLE_S	   60u

static const char *const drop_reason_names[] = {
#define JG_DROP_NAME(name, text) [name] = text,
	JG_DROP_REASONS(JG_DROP_NAME)
#undef JG_DROP_NAME
};

const char *jg_drop_reason_name(enum jg_drop_reason reason)
{
	if ((unsigned int)reason >= JG_DROP_REASON_COUNT)
		return "unknown";
	return drop_reason_names[reason];
}

void jg_engine_config_init(struct jg_engine_config *config)
{
	memset(config, 0, sizeof(*config));
	config->internal_mtu = JG_DEFAULT_INTERNAL_MTU;
	config->max_flows = DEFAULT_MAX_FLOWS;
	config->max_chain_segments = DEFAULT_MAX_CHAIN_SEGMENTS;
	config->max_held_segments = DEFAULT_MAX_HELD_SEGMENTS;
	config->delay.rate_threshold_gbps = 0.1;
	config->delay.yield_threshold = 0.93;
	config->delay.quantile = 0.95;
	config->delay.max_delay_us = DEFAULT_MAX_DELAY_US;
	config->checksum_mode = JG_CHECKSUM_SOFTWARE;
	config->verify_unknown_checksums = true;
	config->merge_unknown_flows = true;
	config->default_path_mtu_v4 = JG_DEFAULT_PATH_MTU_V4;
	config->default_path_mtu_v6 = JG_DEFAULT_PATH_MTU_V6;
	config->pmtu_max_rules_v4 = 1024;
	config->pmtu_max_rules_v6 = 1024;
	config->caravan_dscp = DEFAULT_CARAVAN_DSCP;
	config->socket_id = SOCKET_ID_ANY;
	config->name = "jumbogate";
	config->raise_syn_mss = true;
	config->onload_idle_s = DEFAULT_ONLOAD_IDLE_S;
}

static bool config_valid(const struct jg_engine_config *c)
{
	return c->internal_mtu >= MIN_INTERNAL_MTU &&
	       c->internal_mtu <= JG_MAX_INTERNAL_MTU && c->max_flows > 0 &&
	       c->max_chain_segments >= 2 && c->max_held_segments > 0 &&
	       c->delay.max_delay_us <= JG_MAX_DELAY_US &&
	       c->delay.quantile > 0.0 && c->delay.quantile < 1.0 &&
	       c->delay.yield_threshold >= 0.0 &&
	       c->delay.rate_threshold_gbps >= 0.0 &&
	       c->default_path_mtu_v4 >= JG_MIN_PATH_MTU_V4 &&
	       c->default_path_mtu_v6 >= JG_MIN_PATH_MTU_V6 &&
	       c->caravan_dscp < 64 && c->onload_idle_s > 0 &&
	       c->onload_idle_s <= 86400 && c->header_pool != NULL &&
	       c->name != NULL;
}

static int register_run_meta(void)
{
	static const struct rte_mbuf_dynfield field = {
		.name = "jumbogate_run_meta",
		.size = sizeof(struct jg_run_meta),
		.align = __alignof__(struct jg_run_meta),
	};

	return rte_mbuf_dynfield_register(&field);
}

struct jg_engine *jg_engine_create(const struct jg_engine_config *config)
{
	struct jg_engine *e;
	uint32_t ready_size;

	if (config == NULL || !config_valid(config)) {
		rte_errno = EINVAL;
		return NULL;
	}
	e = rte_zmalloc_socket("jg_engine", sizeof(*e), RTE_CACHE_LINE_SIZE,
			       config->socket_id);
	if (e == NULL) {
		rte_errno = ENOMEM;
		return NULL;
	}
	e->config = *config;
	e->memory_bytes = sizeof(*e);
	e->header_room = rte_pktmbuf_data_room_size(config->header_pool) -
			 RTE_PKTMBUF_HEADROOM;
	e->full_packet_ip_length = (config->internal_mtu * 9 + 9) / 10;
	e->run_meta_offset = register_run_meta();
	if (e->run_meta_offset < 0 && rte_errno == ENOENT &&
	    config->run_meta_in_priv_area) {
		/* No room left among the dynamic fields: the private area
		 * starts right after struct rte_mbuf (rte_mbuf_to_priv). */
		e->run_meta_offset = (int)sizeof(struct rte_mbuf);
		e->meta_in_priv_area = true;
	}
	if (e->run_meta_offset < 0)
		goto fail;
	jg_delay_model_init(e);

	ready_size =
		rte_align32pow2(config->max_held_segments + READY_QUEUE_SLACK);
	e->ready = rte_zmalloc_socket("jg_ready", ready_size * sizeof(void *),
				      RTE_CACHE_LINE_SIZE, config->socket_id);
	if (e->ready == NULL) {
		rte_errno = ENOMEM;
		goto fail;
	}
	e->ready_mask = ready_size - 1;
	e->memory_bytes += ready_size * sizeof(void *);

	if (jg_flow_table_init(e) != 0) {
		rte_errno = ENOMEM;
		goto fail;
	}
	if (jg_pmtu_init(e) != 0)
		goto fail;
	return e;
fail:
	jg_engine_destroy(e);
	return NULL;
}

bool jg_engine_merge_rules_differ(const struct jg_engine_config *from,
				  const struct jg_engine_config *to)
{
	return from->internal_mtu != to->internal_mtu ||
	       from->max_chain_segments != to->max_chain_segments ||
	       from->delay.rate_threshold_gbps !=
		       to->delay.rate_threshold_gbps ||
	       from->delay.yield_threshold != to->delay.yield_threshold ||
	       from->delay.quantile != to->delay.quantile ||
	       from->delay.max_delay_us != to->delay.max_delay_us ||
	       from->delay.wait_always != to->delay.wait_always;
}

int jg_engine_reconfigure(struct jg_engine *e,
			  const struct jg_engine_config *config)
{
	struct jg_engine_config next = e->config;

	next.internal_mtu = config->internal_mtu;
	next.max_chain_segments = config->max_chain_segments;
	next.delay = config->delay;
	next.default_path_mtu_v4 = config->default_path_mtu_v4;
	next.default_path_mtu_v6 = config->default_path_mtu_v6;
	next.merge_unknown_flows = config->merge_unknown_flows;
	if (!config_valid(&next))
		return -EINVAL;
	if (jg_engine_merge_rules_differ(&e->config, &next)) {
		if (e->held_segments != 0 || e->ready_tail != e->ready_head)
			return -EBUSY;
		e->config = next;
		e->full_packet_ip_length = (next.internal_mtu * 9 + 9) / 10;
		/* Nothing is held, so the timer wheel is empty: starting it
		 * afresh with the new model loses no deadline. */
		jg_delay_model_init(e);
	} else {
		e->config = next;
	}
	return 0;
}

bool jg_engine_meta_in_priv_area(const struct jg_engine *e)
{
	return e->meta_in_priv_area;
}

void jg_engine_destroy(struct jg_engine *e)
{
	struct rte_mbuf *leftovers[64];
	uint16_t count;

	if (e == NULL)
		return;
	if (e->flows != NULL && e->ready != NULL) {
		while ((count = jg_merge_flush_all(e, leftovers,
						   RTE_DIM(leftovers))) > 0)
			rte_pktmbuf_free_bulk(leftovers, count);
	}
	jg_pmtu_free(e);
	jg_flow_table_free(e);
	rte_free(e->ready);
	rte_free(e);
}

uint32_t jg_engine_max_delay_ns(const struct jg_engine *e)
{
	return e->max_delay_ns;
}

void jg_engine_get_stats(const struct jg_engine *e, struct jg_stats *stats)
{
	*stats = e->stats;
	stats->merge.held_now = e->held_segments;
	stats->merge.ready_now = e->ready_tail - e->ready_head;
	stats->flows_now = e->flows_now;
	stats->flow_capacity = e->flow_capacity;
	stats->flow_entry_bytes = sizeof(struct jg_flow);
	stats->flow_state_bytes = sizeof(struct jg_flow) +
				  sizeof(struct jg_flow_key) +
				  sizeof(struct jg_bucket) / JG_BUCKET_WAYS;
	stats->memory_bytes = e->memory_bytes;
}

double jg_stats_conversion_yield(const struct jg_stats *stats)
{
	if (stats->merge.tcp_payload_in == 0)
		return 0.0;
	return (double)stats->merge.tcp_payload_full /
	       (double)stats->merge.tcp_payload_in;
}
