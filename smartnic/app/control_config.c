/* SPDX-License-Identifier: Apache-2.0 */
/* Control operations: info and configuration. */
#include "control_internal.h"

/* ------------------------------------------------------------------ */
/* Info and configuration                                              */

void nic_control_info(struct nic_info_view *info)
{
	struct nic *nic = control_state.nic;

	memset(info, 0, sizeof(*info));
	if (nic == NULL)
		return;
	info->boot_id = nic->boot_id;
	info->uptime_s = (double)(nic_now_ns() - nic->start_ns) / 1e9;
	info->workers = nic->worker_count;
	info->port_count = nic->port_count;
	for (unsigned int p = 0; p < nic->port_count; p++)
		info->ports[p] = nic->ports[p].name;
}

static void view_of(const struct jg_engine_config *engine,
		    struct nic_config_view *view)
{
	view->internal_mtu = engine->internal_mtu;
	view->max_flows = engine->max_flows;
	view->max_segments = engine->max_chain_segments;
	view->rate_threshold_bps =
		(uint64_t)llround(engine->delay.rate_threshold_gbps * 1e9);
	view->yield_threshold = engine->delay.yield_threshold;
	view->quantile = engine->delay.quantile;
	view->max_delay_us = engine->delay.max_delay_us;
	view->default_path_mtu_v4 = engine->default_path_mtu_v4;
	view->default_path_mtu_v6 = engine->default_path_mtu_v6;
	view->merge_unknown_flows = engine->merge_unknown_flows;
	view->internal_prefix_count = control_state.internal.count;
	for (unsigned int i = 0; i < control_state.internal.count; i++)
		nic_prefix_format(&control_state.internal.prefixes[i],
				  view->internal_prefixes[i],
				  sizeof(view->internal_prefixes[i]));
}

void nic_control_get_config(struct nic_config_view *config)
{
	pthread_mutex_lock(&control_state.lock);
	if (control_state.nic)
		view_of(&control_state.nic->engine_config, config);
	pthread_mutex_unlock(&control_state.lock);
}

static bool out_of_range_u32(uint32_t value, uint32_t min, uint32_t max)
{
	return value != 0 && (value < min || value > max);
}

/* Check a Configure request whole and build the resulting engine
 * configuration; the running one is untouched. */
static struct nic_result validate_config(const struct nic_config_request *req,
					 const struct jg_engine_config *current,
					 uint32_t port_mtu,
					 uint32_t path_mtu_limit,
					 uint16_t max_tx_segments,
					 struct jg_engine_config *next)
{
	const struct nic_config_view *v = &req->values;

	if (out_of_range_u32(v->internal_mtu, NIC_MIN_INTERNAL_MTU, port_mtu))
		return control_fail(
			NIC_STATUS_INVALID_ARGUMENT,
			"internal_mtu %u is outside %u..%u (the largest port "
			"MTU)",
			v->internal_mtu, NIC_MIN_INTERNAL_MTU, port_mtu);
	if (out_of_range_u32(v->max_flows, NIC_MIN_MAX_FLOWS,
			     NIC_MAX_MAX_FLOWS))
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "max_flows %u is outside %u..%u",
				    v->max_flows, NIC_MIN_MAX_FLOWS,
				    NIC_MAX_MAX_FLOWS);
	if (out_of_range_u32(v->max_segments, NIC_MIN_MAX_SEGMENTS,
			     max_tx_segments))
		return control_fail(
			NIC_STATUS_INVALID_ARGUMENT,
			"max_segments %u is outside %u..%u (what the ports "
			"can send)",
			v->max_segments, NIC_MIN_MAX_SEGMENTS, max_tx_segments);
	if (v->rate_threshold_bps > 10000000000000ull)
		return control_fail(
			NIC_STATUS_INVALID_ARGUMENT,
			"delay.rate_threshold_bps %llu is above 10 Tbit/s",
			(unsigned long long)v->rate_threshold_bps);
	if (isnan(v->yield_threshold) || v->yield_threshold < 0 ||
	    v->yield_threshold > 1)
		return control_fail(
			NIC_STATUS_INVALID_ARGUMENT,
			"delay.yield_threshold %g is outside (0, 1]",
			v->yield_threshold);
	if (isnan(v->quantile) || v->quantile < 0 || v->quantile >= 1)
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "delay.quantile %g is outside (0, 1)",
				    v->quantile);
	if (v->max_delay_us > NIC_MAX_DELAY_US)
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "delay.max_delay_us %u is above %u",
				    v->max_delay_us, NIC_MAX_DELAY_US);
	if (out_of_range_u32(v->default_path_mtu_v4, JG_MIN_PATH_MTU_V4,
			     path_mtu_limit))
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "default_path_mtu_v4 %u is outside %u..%u",
				    v->default_path_mtu_v4, JG_MIN_PATH_MTU_V4,
				    path_mtu_limit);
	if (out_of_range_u32(v->default_path_mtu_v6, JG_MIN_PATH_MTU_V6,
			     path_mtu_limit))
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "default_path_mtu_v6 %u is outside %u..%u",
				    v->default_path_mtu_v6, JG_MIN_PATH_MTU_V6,
				    path_mtu_limit);
	*next = *current;
	if (v->internal_mtu)
		next->internal_mtu = v->internal_mtu;
	if (v->max_flows)
		next->max_flows = v->max_flows;
	if (v->max_segments)
		next->max_chain_segments = (uint16_t)v->max_segments;
	if (v->rate_threshold_bps)
		next->delay.rate_threshold_gbps =
			(double)v->rate_threshold_bps / 1e9;
	if (v->yield_threshold != 0)
		next->delay.yield_threshold = v->yield_threshold;
	if (v->quantile != 0)
		next->delay.quantile = v->quantile;
	if (v->max_delay_us)
		next->delay.max_delay_us = v->max_delay_us;
	if (v->default_path_mtu_v4)
		next->default_path_mtu_v4 = (uint16_t)v->default_path_mtu_v4;
	if (v->default_path_mtu_v6)
		next->default_path_mtu_v6 = (uint16_t)v->default_path_mtu_v6;
	if (req->set_merge_unknown_flows)
		next->merge_unknown_flows = v->merge_unknown_flows;
	return control_ok();
}

static bool same_config(const struct jg_engine_config *a,
			const struct jg_engine_config *b)
{
	return a->internal_mtu == b->internal_mtu &&
	       a->max_flows == b->max_flows &&
	       a->max_chain_segments == b->max_chain_segments &&
	       a->delay.rate_threshold_gbps == b->delay.rate_threshold_gbps &&
	       a->delay.yield_threshold == b->delay.yield_threshold &&
	       a->delay.quantile == b->delay.quantile &&
	       a->delay.max_delay_us == b->delay.max_delay_us &&
	       a->default_path_mtu_v4 == b->default_path_mtu_v4 &&
	       a->default_path_mtu_v6 == b->default_path_mtu_v6 &&
	       a->merge_unknown_flows == b->merge_unknown_flows;
}

/* Give new engines everything the running ones were told. */
static int replay_state(struct jg_engine *engine)
{
	for (size_t i = 0; i < control_state.path_mtu_count; i++) {
		int result =
			jg_pmtu_set(engine, &control_state.path_mtus[i].prefix,
				    control_state.path_mtus[i].mtu);
		if (result < 0)
			return result;
	}
	/* Its clock starts now, not at its first burst, or every replayed
	 * pin would look idle since the clock's origin. */
	jg_engine_advance_clock(engine, nic_now_ns());
	for (size_t i = 0; i < control_state.flow_count; i++) {
		int result = jg_flow_onload(engine, &control_state.flows[i]);
		if (result < 0)
			return result;
	}
	return 0;
}

/* Everything but the flow-table size changes on the running engines,
 * which keep their flows, learned MSS and held data (unless the merge
 * rules change, when held data leaves first). */
static struct nic_result reconfigure(struct nic *nic,
				     const struct jg_engine_config *next)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command template = {.type = NIC_CMD_RECONFIGURE};
	struct nic_result result;

	template.arg.reconfigure.from = nic->engine_config;
	template.arg.reconfigure.to = *next;
	result = control_broadcast(&template, commands);
	for (unsigned int w = 0; w < nic->worker_count; w++)
		if (commands[w] != NULL && commands[w]->result < 0 &&
		    result.status == NIC_STATUS_OK)
			result =
				control_fail(NIC_STATUS_INTERNAL,
					     "worker %u could not apply the "
					     "configuration: %s",
					     w, strerror(-commands[w]->result));
	control_release(commands);
	/* A worker that did not answer applies it when it gets to it. */
	nic->engine_config = *next;
	return result;
}

/* Put the engines on a validated new configuration. Caller holds the
 * lock. */
static struct nic_result
change_engines(struct nic *nic, const struct jg_engine_config *next_config)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct jg_engine *fresh[NIC_MAX_WORKERS][NIC_MAX_PORTS] = {{0}};
	struct nic_command swap = {.type = NIC_CMD_SWAP_ENGINES};
	struct jg_engine_config next = *next_config;
	struct nic_result result = control_ok();

	/* New engines, or a new idle time, date the pins anew. */
	control_state.no_lapse_before_ns = 0;
	if (next.max_flows == nic->engine_config.max_flows)
		return reconfigure(nic, &next);
	/* Only flows still pinned somewhere are onloaded anew (and must fit
	 * the new pin budget); if a worker does not answer, all are. */
	(void)control_prune_flows(NULL);
	/* A new flow-table size needs new engines: build them now, while
	 * no worker can see them, and swap them in below. */
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		for (unsigned int p = 0; p < nic->port_count; p++) {
			int replayed;

			fresh[w][p] = nic_engine_create(nic, &next, w, p);
			if (fresh[w][p] == NULL) {
				result = control_fail(
					NIC_STATUS_RESOURCE_EXHAUSTED,
					"cannot create an engine with "
					"max_flows %u: %s",
					next.max_flows,
					rte_strerror(rte_errno));
				goto undo;
			}
			replayed = replay_state(fresh[w][p]);
			if (replayed < 0) {
				result = control_fail(
					NIC_STATUS_RESOURCE_EXHAUSTED,
					"the %zu onloaded flows and %zu "
					"path MTUs do not fit the new "
					"engine: %s",
					control_state.flow_count,
					control_state.path_mtu_count,
					strerror(-replayed));
				goto undo;
			}
		}
	}
	/* Each worker gets its own replacements and hands back the engines
	 * they replace, already flushed. */
	if (!control_copy_command(&swap, commands)) {
		result = control_fail(NIC_STATUS_INTERNAL, "out of memory");
		goto undo;
	}
	for (unsigned int w = 0; w < nic->worker_count; w++)
		memcpy(commands[w]->arg.engines, fresh[w], sizeof(fresh[w]));
	if (atomic_load(&nic->stop)) {
		control_release(commands);
		result = control_fail(NIC_STATUS_UNAVAILABLE,
				      "the program is stopping");
		goto undo;
	}
	result = control_post_and_wait(commands);
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		/* A worker that did not answer still swaps when it gets to
		 * the command: its new engines are in the command, not here. */
		if (commands[w] == NULL)
			continue;
		for (unsigned int p = 0; p < nic->port_count; p++)
			jg_engine_destroy(commands[w]->arg.engines[p]);
	}
	control_release(commands);
	nic->engine_config = next;
	return result;
undo:
	for (unsigned int w = 0; w < nic->worker_count; w++)
		for (unsigned int p = 0; p < nic->port_count; p++)
			if (fresh[w][p])
				jg_engine_destroy(fresh[w][p]);
	return result;
}

static struct nic_result
parse_internal_prefixes(const struct nic_config_request *req,
			struct nic_prefix_list *list)
{
	char error[128];

	if (req->internal_prefix_count == 0)
		return control_fail(
			NIC_STATUS_INVALID_ARGUMENT,
			"internal_prefixes is empty: every packet would "
			"bypass the SmartNIC");
	if (req->internal_prefix_count > NIC_MAX_INTERNAL_PREFIXES)
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "more than %d internal_prefixes",
				    NIC_MAX_INTERNAL_PREFIXES);
	memset(list, 0, sizeof(*list));
	for (unsigned int i = 0; i < req->internal_prefix_count; i++) {
		if (!nic_prefix_parse(req->internal_prefixes[i],
				      &list->prefixes[i], error, sizeof(error)))
			return control_fail(NIC_STATUS_INVALID_ARGUMENT,
					    "internal_prefixes[%u]: %s", i,
					    error);
	}
	list->count = req->internal_prefix_count;
	return control_ok();
}

static bool same_prefixes(const struct nic_prefix_list *a,
			  const struct nic_prefix_list *b)
{
	if (a->count != b->count)
		return false;
	for (unsigned int i = 0; i < a->count; i++)
		if (!nic_prefix_equal(&a->prefixes[i], &b->prefixes[i]))
			return false;
	return true;
}

/* Every worker takes the new prefixes between two bursts. Caller holds
 * the lock. */
static struct nic_result
set_internal_prefixes(const struct nic_prefix_list *list)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command template = {.type = NIC_CMD_SET_INTERNAL_PREFIXES};
	struct nic_result result;

	template.arg.internal = *list;
	result = control_broadcast(&template, commands);
	control_release(commands);
	/* A worker that did not answer takes them when it gets to it. */
	control_state.internal = *list;
	return result;
}

struct nic_result nic_control_configure(const struct nic_config_request *req,
					struct nic_config_view *config)
{
	struct nic_prefix_list internal;
	struct jg_engine_config next;
	struct nic_result result;
	struct nic *nic;

	pthread_mutex_lock(&control_state.lock);
	nic = control_state.nic;
	/* The whole request is checked before anything changes. */
	result = validate_config(
		req, &nic->engine_config, nic->options->largest_port_mtu,
		nic->options->smallest_port_mtu, nic->max_tx_segments, &next);
	if (result.status == NIC_STATUS_OK && req->set_internal_prefixes)
		result = parse_internal_prefixes(req, &internal);
	if (result.status == NIC_STATUS_OK &&
	    !same_config(&next, &nic->engine_config))
		result = change_engines(nic, &next);
	/* Last: the engines' part is the one that can still fail. */
	if (result.status == NIC_STATUS_OK && req->set_internal_prefixes &&
	    !same_prefixes(&internal, &control_state.internal))
		result = set_internal_prefixes(&internal);
	view_of(&nic->engine_config, config);
	pthread_mutex_unlock(&control_state.lock);
	return result;
}
