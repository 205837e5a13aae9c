/* SPDX-License-Identifier: Apache-2.0 */
#include "control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_errno.h>
#include <rte_ring.h>

#include "engines.h"
#include "nic.h"
#include "pathmtu.h"
#include "stats.h"

/* A worker polls its ring between bursts and sleeps at most
 * --idle-sleep-max-us, so an answer later than --command-timeout-ms means
 * it is stuck. */

/* ListFlows asks the workers for this many flows per command, so that a
 * worker never spends more than a few tens of microseconds of its packet
 * loop on one request. */
#define FLOWS_PER_COMMAND 512u

static struct {
	pthread_mutex_t lock;
	struct nic *nic;
	/* What the engines were told, for List* and for replaying onto new
	 * engines after a reconfiguration (the engine has no list calls). */
	struct nic_path_mtu_rule {
		struct jg_prefix prefix;
		uint16_t mtu;
	} * path_mtus;
	size_t path_mtu_count;
	struct jg_flow_key *flows;
	size_t flow_count;
	/* What the workers classify by (each holds its own copy). */
	struct nic_prefix_list internal;
} control = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const app_drop_names[] = {
#define NIC_DROP_NAME(name, text) text,
	NIC_APP_DROP_REASONS(NIC_DROP_NAME)
#undef NIC_DROP_NAME
};

const char *nic_app_drop_reason_name(enum nic_app_drop_reason reason)
{
	return reason < NIC_APP_DROP_REASON_COUNT ? app_drop_names[reason]
						  : "unknown";
}

const char *nic_drop_reason_name(unsigned int index)
{
	if (index < JG_DROP_REASON_COUNT)
		return jg_drop_reason_name((enum jg_drop_reason)index);
	index -= JG_DROP_REASON_COUNT;
	if (index < NIC_APP_DROP_REASON_COUNT)
		return app_drop_names[index];
	return NULL;
}

uint64_t nic_drop_count(const struct nic_totals *totals, unsigned int index)
{
	if (index < JG_DROP_REASON_COUNT)
		return totals->engine.drops[index];
	index -= JG_DROP_REASON_COUNT;
	if (index < NIC_APP_DROP_REASON_COUNT)
		return totals->counters.drops[index];
	return 0;
}

static struct nic_result ok(void)
{
	struct nic_result result = {.status = NIC_STATUS_OK};
	return result;
}

static struct nic_result fail(enum nic_status status, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static struct nic_result fail(enum nic_status status, const char *format, ...)
{
	struct nic_result result = {.status = status};
	va_list args;

	va_start(args, format);
	vsnprintf(result.message, sizeof(result.message), format, args);
	va_end(args);
	return result;
}

void nic_control_init(struct nic *nic)
{
	const struct nic_options *options = nic->options;

	control.nic = nic;
	control.internal.count = options->internal_prefix_count;
	memcpy(control.internal.prefixes, options->internal_prefixes,
	       sizeof(control.internal.prefixes));
	control.path_mtu_count = 0;
	control.path_mtus =
		calloc(options->path_mtu_count + 1, sizeof(*control.path_mtus));
	for (unsigned int i = 0; i < options->path_mtu_count; i++) {
		size_t j;

		/* A later --path-mtu for the same prefix replaced it. */
		for (j = 0; j < control.path_mtu_count; j++)
			if (nic_prefix_equal(&control.path_mtus[j].prefix,
					     &options->path_mtus[i].prefix))
				break;
		control.path_mtus[j].prefix = options->path_mtus[i].prefix;
		control.path_mtus[j].mtu = options->path_mtus[i].mtu;
		if (j == control.path_mtu_count)
			control.path_mtu_count++;
	}
}

void nic_control_fini(void)
{
	pthread_mutex_lock(&control.lock);
	free(control.path_mtus);
	free(control.flows);
	control.path_mtus = NULL;
	control.flows = NULL;
	control.path_mtu_count = control.flow_count = 0;
	control.nic = NULL;
	pthread_mutex_unlock(&control.lock);
}

/* ------------------------------------------------------------------ */
/* Commands to every worker                                            */

static void sleep_briefly(void)
{
	const struct timespec pause = {.tv_nsec = 20000};
	nanosleep(&pause, NULL);
}

/*
 * Post one command per worker (commands[w] for worker w, all PENDING) and
 * wait for every answer. A command a worker has not answered in time is
 * abandoned to the worker, which frees it, and its slot becomes NULL.
 */
static struct nic_result post_and_wait(struct nic_command **commands)
{
	struct nic *nic = control.nic;
	struct nic_result result = ok();
	uint64_t deadline;

	if (nic == NULL || atomic_load(&nic->stop)) {
		for (unsigned int w = 0; nic && w < nic->worker_count; w++) {
			nic_command_discard(commands[w]);
			commands[w] = NULL;
		}
		return fail(NIC_STATUS_UNAVAILABLE, "the program is stopping");
	}
	/* Only one request is in flight at a time (the lock), but commands
	 * a stuck worker has not taken yet stay in its ring: when the ring
	 * is full the worker is refused this one. */
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		if (rte_ring_sp_enqueue(nic->workers[w].commands,
					commands[w]) == 0)
			continue;
		nic_command_discard(commands[w]);
		commands[w] = NULL;
		if (result.status == NIC_STATUS_OK)
			result = fail(NIC_STATUS_UNAVAILABLE,
				      "worker %u has %u requests it has not "
				      "taken",
				      w,
				      rte_ring_count(nic->workers[w].commands));
	}
	deadline = nic_now_ns() +
		   (uint64_t)nic->options->command_timeout_ms * 1000000ull;
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		int expected = NIC_COMMAND_PENDING;

		if (commands[w] == NULL)
			continue;
		while (atomic_load(&commands[w]->state) ==
			       NIC_COMMAND_PENDING &&
		       nic_now_ns() < deadline)
			sleep_briefly();
		if (atomic_compare_exchange_strong(&commands[w]->state,
						   &expected,
						   NIC_COMMAND_ABANDONED)) {
			commands[w] = NULL;
			if (result.status == NIC_STATUS_OK)
				result = fail(NIC_STATUS_UNAVAILABLE,
					      "worker %u did not answer within "
					      "%u ms",
					      w,
					      nic->options->command_timeout_ms);
		}
	}
	return result;
}

/* Fill commands[] with one copy of template per worker. */
static bool copy_command(const struct nic_command *template,
			 struct nic_command **commands)
{
	for (unsigned int w = 0; w < control.nic->worker_count; w++) {
		commands[w] = malloc(sizeof(**commands));
		if (commands[w] == NULL) {
			for (unsigned int i = 0; i < w; i++)
				free(commands[i]);
			return false;
		}
		*commands[w] = *template;
		atomic_init(&commands[w]->state, NIC_COMMAND_PENDING);
	}
	return true;
}

/* The same command to every worker; answers land in commands[]. */
static struct nic_result broadcast(const struct nic_command *template,
				   struct nic_command **commands)
{
	if (control.nic == NULL)
		return fail(NIC_STATUS_UNAVAILABLE, "the program is stopping");
	if (!copy_command(template, commands))
		return fail(NIC_STATUS_INTERNAL, "out of memory");
	return post_and_wait(commands);
}

static void release(struct nic_command **commands)
{
	for (unsigned int w = 0; w < control.nic->worker_count; w++) {
		free(commands[w]);
		commands[w] = NULL;
	}
}

/* ------------------------------------------------------------------ */
/* Info and configuration                                              */

void nic_control_info(struct nic_info_view *info)
{
	struct nic *nic = control.nic;

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
	view->internal_prefix_count = control.internal.count;
	for (unsigned int i = 0; i < control.internal.count; i++)
		nic_prefix_format(&control.internal.prefixes[i],
				  view->internal_prefixes[i],
				  sizeof(view->internal_prefixes[i]));
}

void nic_control_get_config(struct nic_config_view *config)
{
	pthread_mutex_lock(&control.lock);
	if (control.nic)
		view_of(&control.nic->engine_config, config);
	pthread_mutex_unlock(&control.lock);
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
					 uint16_t max_tx_segments,
					 struct jg_engine_config *next)
{
	const struct nic_config_view *v = &req->values;

	if (out_of_range_u32(v->internal_mtu, NIC_MIN_INTERNAL_MTU, port_mtu))
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "internal_mtu %u is outside %u..%u (the port MTU)",
			    v->internal_mtu, NIC_MIN_INTERNAL_MTU, port_mtu);
	if (out_of_range_u32(v->max_flows, NIC_MIN_MAX_FLOWS,
			     NIC_MAX_MAX_FLOWS))
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "max_flows %u is outside %u..%u", v->max_flows,
			    NIC_MIN_MAX_FLOWS, NIC_MAX_MAX_FLOWS);
	if (out_of_range_u32(v->max_segments, NIC_MIN_MAX_SEGMENTS,
			     max_tx_segments))
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "max_segments %u is outside %u..%u (what the ports "
			    "can send)",
			    v->max_segments, NIC_MIN_MAX_SEGMENTS,
			    max_tx_segments);
	if (v->rate_threshold_bps > 10000000000000ull)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "delay.rate_threshold_bps %llu is above 10 Tbit/s",
			    (unsigned long long)v->rate_threshold_bps);
	if (isnan(v->yield_threshold) || v->yield_threshold < 0 ||
	    v->yield_threshold > 1)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "delay.yield_threshold %g is outside (0, 1]",
			    v->yield_threshold);
	if (isnan(v->quantile) || v->quantile < 0 || v->quantile >= 1)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "delay.quantile %g is outside (0, 1)", v->quantile);
	if (v->max_delay_us > NIC_MAX_DELAY_US)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "delay.max_delay_us %u is above %u",
			    v->max_delay_us, NIC_MAX_DELAY_US);
	if (out_of_range_u32(v->default_path_mtu_v4, JG_MIN_PATH_MTU_V4,
			     port_mtu))
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "default_path_mtu_v4 %u is outside %u..%u",
			    v->default_path_mtu_v4, JG_MIN_PATH_MTU_V4,
			    port_mtu);
	if (out_of_range_u32(v->default_path_mtu_v6, JG_MIN_PATH_MTU_V6,
			     port_mtu))
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "default_path_mtu_v6 %u is outside %u..%u",
			    v->default_path_mtu_v6, JG_MIN_PATH_MTU_V6,
			    port_mtu);
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
	return ok();
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
	for (size_t i = 0; i < control.path_mtu_count; i++) {
		int result = jg_pmtu_set(engine, &control.path_mtus[i].prefix,
					 control.path_mtus[i].mtu);
		if (result < 0)
			return result;
	}
	for (size_t i = 0; i < control.flow_count; i++) {
		int result = jg_flow_onload(engine, &control.flows[i]);
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
	result = broadcast(&template, commands);
	for (unsigned int w = 0; w < nic->worker_count; w++)
		if (commands[w] != NULL && commands[w]->result < 0 &&
		    result.status == NIC_STATUS_OK)
			result = fail(NIC_STATUS_INTERNAL,
				      "worker %u could not apply the "
				      "configuration: %s",
				      w, strerror(-commands[w]->result));
	release(commands);
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
	struct nic_result result = ok();

	if (next.max_flows == nic->engine_config.max_flows)
		return reconfigure(nic, &next);
	/* A new flow-table size needs new engines: build them now, while
	 * no worker can see them, and swap them in below. */
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		for (unsigned int p = 0; p < nic->port_count; p++) {
			int replayed;

			fresh[w][p] = nic_engine_create(nic, &next, w, p);
			if (fresh[w][p] == NULL) {
				result = fail(NIC_STATUS_RESOURCE_EXHAUSTED,
					      "cannot create an engine with "
					      "max_flows %u: %s",
					      next.max_flows,
					      rte_strerror(rte_errno));
				goto undo;
			}
			replayed = replay_state(fresh[w][p]);
			if (replayed < 0) {
				result = fail(NIC_STATUS_RESOURCE_EXHAUSTED,
					      "the %zu onloaded flows and %zu "
					      "path MTUs do not fit the new "
					      "engine: %s",
					      control.flow_count,
					      control.path_mtu_count,
					      strerror(-replayed));
				goto undo;
			}
		}
	}
	/* Each worker gets its own replacements and hands back the engines
	 * they replace, already flushed. */
	if (!copy_command(&swap, commands)) {
		result = fail(NIC_STATUS_INTERNAL, "out of memory");
		goto undo;
	}
	for (unsigned int w = 0; w < nic->worker_count; w++)
		memcpy(commands[w]->arg.engines, fresh[w], sizeof(fresh[w]));
	if (atomic_load(&nic->stop)) {
		release(commands);
		result =
			fail(NIC_STATUS_UNAVAILABLE, "the program is stopping");
		goto undo;
	}
	result = post_and_wait(commands);
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		/* A worker that did not answer still swaps when it gets to
		 * the command: its new engines are in the command, not here. */
		if (commands[w] == NULL)
			continue;
		for (unsigned int p = 0; p < nic->port_count; p++)
			jg_engine_destroy(commands[w]->arg.engines[p]);
	}
	release(commands);
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
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "internal_prefixes is empty: every packet would "
			    "bypass the SmartNIC");
	if (req->internal_prefix_count > NIC_MAX_INTERNAL_PREFIXES)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "more than %d internal_prefixes",
			    NIC_MAX_INTERNAL_PREFIXES);
	memset(list, 0, sizeof(*list));
	for (unsigned int i = 0; i < req->internal_prefix_count; i++) {
		if (!nic_prefix_parse(req->internal_prefixes[i],
				      &list->prefixes[i], error, sizeof(error)))
			return fail(NIC_STATUS_INVALID_ARGUMENT,
				    "internal_prefixes[%u]: %s", i, error);
	}
	list->count = req->internal_prefix_count;
	return ok();
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
	result = broadcast(&template, commands);
	release(commands);
	/* A worker that did not answer takes them when it gets to it. */
	control.internal = *list;
	return result;
}

struct nic_result nic_control_configure(const struct nic_config_request *req,
					struct nic_config_view *config)
{
	struct nic_prefix_list internal;
	struct jg_engine_config next;
	struct nic_result result;
	struct nic *nic;

	pthread_mutex_lock(&control.lock);
	nic = control.nic;
	/* The whole request is checked before anything changes. */
	result = validate_config(req, &nic->engine_config,
				 nic->options->port_mtu, nic->max_tx_segments,
				 &next);
	if (result.status == NIC_STATUS_OK && req->set_internal_prefixes)
		result = parse_internal_prefixes(req, &internal);
	if (result.status == NIC_STATUS_OK &&
	    !same_config(&next, &nic->engine_config))
		result = change_engines(nic, &next);
	/* Last: the engines' part is the one that can still fail. */
	if (result.status == NIC_STATUS_OK && req->set_internal_prefixes &&
	    !same_prefixes(&internal, &control.internal))
		result = set_internal_prefixes(&internal);
	view_of(&nic->engine_config, config);
	pthread_mutex_unlock(&control.lock);
	return result;
}

/* ------------------------------------------------------------------ */
/* Path MTUs                                                           */

static size_t find_path_mtu(const struct jg_prefix *prefix)
{
	for (size_t i = 0; i < control.path_mtu_count; i++)
		if (nic_prefix_equal(&control.path_mtus[i].prefix, prefix))
			return i;
	return SIZE_MAX;
}

struct nic_result nic_control_set_path_mtu(const char *cidr, uint32_t mtu)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_PMTU_SET};
	char error[NIC_ERROR_LEN];
	struct nic_result result;
	struct jg_prefix prefix;
	uint32_t port_mtu;
	size_t index;

	if (!nic_prefix_parse(cidr, &prefix, error, sizeof(error)))
		return fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	if (prefix.depth == 0)
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "%s covers every destination; set "
			    "default_path_mtu_v4 or _v6 with Configure "
			    "instead",
			    cidr);
	pthread_mutex_lock(&control.lock);
	port_mtu = control.nic->options->port_mtu;
	if (mtu < NIC_MIN_PATH_MTU || mtu > port_mtu) {
		result = fail(NIC_STATUS_INVALID_ARGUMENT,
			      "mtu %u for %s is outside %u..%u", mtu, cidr,
			      NIC_MIN_PATH_MTU, port_mtu);
		goto out;
	}
	index = find_path_mtu(&prefix);
	if (index == SIZE_MAX) {
		uint32_t capacity =
			prefix.ip_version == 4
				? control.nic->engine_config.pmtu_max_rules_v4
				: control.nic->engine_config.pmtu_max_rules_v6;
		size_t same_family = 0;
		void *grown;

		for (size_t i = 0; i < control.path_mtu_count; i++)
			same_family += control.path_mtus[i].prefix.ip_version ==
				       prefix.ip_version;
		if (same_family >= capacity) {
			result = fail(NIC_STATUS_RESOURCE_EXHAUSTED,
				      "the IPv%u path-MTU table is full (%u "
				      "prefixes)",
				      prefix.ip_version, capacity);
			goto out;
		}
		grown = realloc(control.path_mtus,
				(control.path_mtu_count + 1) *
					sizeof(*control.path_mtus));
		if (grown == NULL) {
			result = fail(NIC_STATUS_INTERNAL, "out of memory");
			goto out;
		}
		control.path_mtus = grown;
	}
	command.arg.pmtu.prefix = prefix;
	command.arg.pmtu.mtu = (uint16_t)mtu;
	result = broadcast(&command, commands);
	for (unsigned int w = 0; w < control.nic->worker_count; w++)
		if (commands[w] && commands[w]->result < 0 &&
		    result.status == NIC_STATUS_OK)
			result =
				fail(NIC_STATUS_INTERNAL,
				     "engine refused path MTU %u for %s: %s",
				     mtu, cidr, strerror(-commands[w]->result));
	release(commands);
	if (result.status == NIC_STATUS_OK) {
		if (index == SIZE_MAX)
			index = control.path_mtu_count++;
		control.path_mtus[index].prefix = prefix;
		control.path_mtus[index].mtu = (uint16_t)mtu;
	}
out:
	pthread_mutex_unlock(&control.lock);
	return result;
}

struct nic_result nic_control_delete_path_mtu(const char *cidr)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_PMTU_DELETE};
	char error[NIC_ERROR_LEN];
	struct nic_result result;
	struct jg_prefix prefix;
	size_t index;

	if (!nic_prefix_parse(cidr, &prefix, error, sizeof(error)))
		return fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	pthread_mutex_lock(&control.lock);
	index = find_path_mtu(&prefix);
	if (index == SIZE_MAX) {
		result = fail(NIC_STATUS_NOT_FOUND, "no path MTU is set for %s",
			      cidr);
		goto out;
	}
	command.arg.pmtu.prefix = prefix;
	result = broadcast(&command, commands);
	release(commands);
	if (result.status == NIC_STATUS_OK) {
		control.path_mtus[index] =
			control.path_mtus[--control.path_mtu_count];
	}
out:
	pthread_mutex_unlock(&control.lock);
	return result;
}

struct nic_path_mtu_entry *nic_control_list_path_mtus(size_t *count)
{
	struct nic_path_mtu_entry *entries;

	pthread_mutex_lock(&control.lock);
	*count = control.path_mtu_count;
	entries = calloc(control.path_mtu_count + 1, sizeof(*entries));
	for (size_t i = 0; entries && i < control.path_mtu_count; i++) {
		nic_prefix_format(&control.path_mtus[i].prefix, entries[i].cidr,
				  sizeof(entries[i].cidr));
		entries[i].mtu = control.path_mtus[i].mtu;
	}
	if (entries == NULL)
		*count = 0;
	pthread_mutex_unlock(&control.lock);
	return entries;
}

/* ------------------------------------------------------------------ */
/* Flows                                                               */

static size_t find_flow(const struct jg_flow_key *key)
{
	for (size_t i = 0; i < control.flow_count; i++)
		if (nic_flow_key_equal(&control.flows[i], key))
			return i;
	return SIZE_MAX;
}

static struct nic_result parse_flow(const char *src_ip, const char *dst_ip,
				    uint32_t protocol, uint32_t src_port,
				    uint32_t dst_port, struct jg_flow_key *key)
{
	char error[NIC_ERROR_LEN];

	if (!nic_flow_key_parse(src_ip, dst_ip, protocol, src_port, dst_port,
				key, error, sizeof(error)))
		return fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	return ok();
}

struct nic_result nic_control_onload(const char *src_ip, const char *dst_ip,
				     uint32_t protocol, uint32_t src_port,
				     uint32_t dst_port)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_FLOW_ONLOAD};
	struct nic_result result;
	struct jg_flow_key key;
	bool refused = false;
	void *grown;

	result = parse_flow(src_ip, dst_ip, protocol, src_port, dst_port, &key);
	if (result.status != NIC_STATUS_OK)
		return result;
	pthread_mutex_lock(&control.lock);
	if (find_flow(&key) != SIZE_MAX)
		goto out; /* already onloaded: nothing to do */
	grown = realloc(control.flows,
			(control.flow_count + 1) * sizeof(*control.flows));
	if (grown == NULL) {
		result = fail(NIC_STATUS_INTERNAL, "out of memory");
		goto out;
	}
	control.flows = grown;
	/* The flow's packets reach whichever worker the port's hash picks,
	 * which the program cannot compute for every port type, so every
	 * worker's engines learn the flow. */
	command.arg.flow = key;
	result = broadcast(&command, commands);
	for (unsigned int w = 0; w < control.nic->worker_count; w++)
		refused |= commands[w] && commands[w]->result < 0;
	release(commands);
	if (result.status == NIC_STATUS_OK && refused) {
		struct nic_command undo = {.type = NIC_CMD_FLOW_OFFLOAD};

		undo.arg.flow = key;
		broadcast(&undo, commands);
		release(commands);
		result = fail(NIC_STATUS_RESOURCE_EXHAUSTED,
			      "the flow table is full (max_flows %u)",
			      control.nic->engine_config.max_flows);
	}
	if (result.status == NIC_STATUS_OK)
		control.flows[control.flow_count++] = key;
out:
	pthread_mutex_unlock(&control.lock);
	return result;
}

struct nic_result nic_control_offload(const char *src_ip, const char *dst_ip,
				      uint32_t protocol, uint32_t src_port,
				      uint32_t dst_port, uint64_t *flushed)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_FLOW_OFFLOAD};
	struct nic_result result;
	struct jg_flow_key key;
	size_t index;

	*flushed = 0;
	result = parse_flow(src_ip, dst_ip, protocol, src_port, dst_port, &key);
	if (result.status != NIC_STATUS_OK)
		return result;
	pthread_mutex_lock(&control.lock);
	/* Offload also releases a flow that was merged without being
	 * onloaded (merge_unknown_flows), so it goes to the engines even
	 * when the flow is not in the onload list. */
	command.arg.flow = key;
	result = broadcast(&command, commands);
	for (unsigned int w = 0; w < control.nic->worker_count; w++)
		if (commands[w])
			*flushed += commands[w]->packets;
	release(commands);
	index = find_flow(&key);
	if (result.status == NIC_STATUS_OK && index != SIZE_MAX)
		control.flows[index] = control.flows[--control.flow_count];
	pthread_mutex_unlock(&control.lock);
	return result;
}

/* Add the counters of flows [first, first + count) of the onload list,
 * asked of every worker in one command each; the command owns copies of
 * the keys and its answer array (see struct nic_command). */
static struct nic_result count_flow_page(struct nic_flow_entry *entries,
					 size_t first, size_t count)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_FLOW_COUNTERS};
	struct nic_result result;

	if (!copy_command(&command, commands))
		return fail(NIC_STATUS_INTERNAL, "out of memory");
	for (unsigned int w = 0; w < control.nic->worker_count; w++) {
		struct nic_command *c = commands[w];

		c->arg.flows.keys = malloc(count * sizeof(*c->arg.flows.keys));
		c->arg.flows.counters =
			calloc(count, sizeof(*c->arg.flows.counters));
		c->arg.flows.count = count;
		if (c->arg.flows.keys == NULL ||
		    c->arg.flows.counters == NULL) {
			for (unsigned int i = 0; i < control.nic->worker_count;
			     i++)
				nic_command_discard(commands[i]);
			return fail(NIC_STATUS_INTERNAL, "out of memory");
		}
		memcpy(c->arg.flows.keys, &control.flows[first],
		       count * sizeof(*c->arg.flows.keys));
	}
	result = post_and_wait(commands);
	for (unsigned int w = 0; w < control.nic->worker_count; w++) {
		if (commands[w] == NULL) /* abandoned: the worker frees it */
			continue;
		for (size_t i = 0; i < count; i++) {
			entries[first + i].packets_in +=
				commands[w]->arg.flows.counters[i].packets_in;
			entries[first + i].merged_packets +=
				commands[w]
					->arg.flows.counters[i]
					.merged_packets;
		}
		nic_command_discard(commands[w]);
	}
	return result;
}

struct nic_flow_entry *nic_control_list_flows(size_t *count,
					      struct nic_result *result)
{
	struct nic_flow_entry *entries;
	size_t flows;

	*count = 0;
	pthread_mutex_lock(&control.lock);
	flows = control.flow_count;
	entries = calloc(flows + 1, sizeof(*entries));
	*result = entries ? ok() : fail(NIC_STATUS_INTERNAL, "out of memory");
	for (size_t first = 0; result->status == NIC_STATUS_OK && first < flows;
	     first += FLOWS_PER_COMMAND)
		*result = count_flow_page(
			entries, first,
			RTE_MIN(flows - first, FLOWS_PER_COMMAND));
	for (size_t i = 0; result->status == NIC_STATUS_OK && i < flows; i++) {
		const struct jg_flow_key *key = &control.flows[i];
		struct nic_flow_entry *entry = &entries[i];

		nic_flow_key_address(key, true, entry->src_ip,
				     sizeof(entry->src_ip));
		nic_flow_key_address(key, false, entry->dst_ip,
				     sizeof(entry->dst_ip));
		entry->protocol = key->protocol;
		entry->src_port = ntohs(key->src_port);
		entry->dst_port = ntohs(key->dst_port);
	}
	if (result->status == NIC_STATUS_OK) {
		*count = flows;
	} else {
		free(entries);
		entries = NULL;
	}
	pthread_mutex_unlock(&control.lock);
	return entries;
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */

struct nic_result nic_control_stats(struct nic_totals *totals)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_worker_snapshot snapshots[NIC_MAX_WORKERS];
	struct nic_command command = {.type = NIC_CMD_SNAPSHOT};
	struct nic_result result;
	unsigned int count = 0;

	memset(totals, 0, sizeof(*totals));
	pthread_mutex_lock(&control.lock);
	if (control.nic == NULL) {
		pthread_mutex_unlock(&control.lock);
		return fail(NIC_STATUS_UNAVAILABLE, "the program is stopping");
	}
	result = broadcast(&command, commands);
	if (result.status == NIC_STATUS_OK)
		for (unsigned int w = 0; w < control.nic->worker_count; w++)
			snapshots[count++] = commands[w]->snapshot;
	release(commands);
	pthread_mutex_unlock(&control.lock);
	if (result.status == NIC_STATUS_OK)
		nic_totals_compute(totals, snapshots, count);
	return result;
}

/* ------------------------------------------------------------------ */
/* Path MTU discovery                                                  */

static void learned_path_of(const struct nic_pmtu_view *view,
			    struct nic_learned_path *path)
{
	memset(path, 0, sizeof(*path));
	inet_ntop(view->ip_version == 4 ? AF_INET : AF_INET6, view->addr,
		  path->address, sizeof(path->address));
	path->mtu = view->mtu;
	path->method = nic_pathmtu_method_name(view->method);
	path->exact = view->exact;
	path->probing = view->probing;
	path->age_s = view->age_s;
	path->rtt_ms = view->rtt_ms;
}

struct nic_learned_path *nic_control_learned_paths(size_t *count, bool *enabled)
{
	struct nic_pathmtu *pm = control.nic ? control.nic->pathmtu : NULL;
	struct nic_learned_path *paths;
	struct nic_pmtu_view *views;
	struct nic_pmtu_stats stats;
	unsigned int listed;

	*count = 0;
	*enabled = pm != NULL;
	if (pm == NULL)
		return NULL;
	nic_pathmtu_get_stats(pm, &stats);
	/* Room for those there now and a few that may come meanwhile. */
	views = calloc(stats.destinations_now + 64, sizeof(*views));
	paths = calloc(stats.destinations_now + 64, sizeof(*paths));
	if (views == NULL || paths == NULL) {
		free(views);
		free(paths);
		return NULL;
	}
	listed = nic_pathmtu_list(pm, nic_now_ns(), views,
				  (unsigned int)stats.destinations_now + 64);
	for (unsigned int i = 0; i < listed; i++)
		learned_path_of(&views[i], &paths[i]);
	free(views);
	*count = listed;
	return paths;
}

struct nic_result nic_control_probe_path(const char *address, bool exact,
					 struct nic_learned_path *path)
{
	struct nic_pathmtu *pm = control.nic ? control.nic->pathmtu : NULL;
	uint8_t addr[16] = {0};
	struct nic_pmtu_view view;
	uint8_t version;
	uint64_t asked, deadline;
	int requested;

	if (pm == NULL)
		return fail(NIC_STATUS_FAILED_PRECONDITION,
			    "path MTU discovery is off (--pmtu-discovery on)");
	if (inet_pton(AF_INET, address, addr) == 1)
		version = 4;
	else if (inet_pton(AF_INET6, address, addr) == 1)
		version = 6;
	else
		return fail(NIC_STATUS_INVALID_ARGUMENT,
			    "'%s' is not an IPv4 or IPv6 address", address);
	asked = nic_now_ns();
	requested = nic_pathmtu_request_round(pm, version, addr, exact);
	if (requested == -ENOENT)
		return fail(NIC_STATUS_NOT_FOUND,
			    "no outbound traffic to %s seen yet: a probe goes "
			    "out the way that traffic came, from its source",
			    address);
	if (requested == -EBUSY)
		return fail(NIC_STATUS_UNAVAILABLE,
			    "too many probes asked for at once; try again");
	/* A round, its second copy, and each refinement at most a round's
	 * timeout. */
	deadline = asked + ((2ull + (exact ? NIC_PMTU_MAX_REFINE_ROUNDS : 0)) *
				    control.nic->options->pmtu.timeout_ms +
			    control.nic->options->command_timeout_ms) *
				   1000000ull;
	/* -EALREADY: a round is under way; its answer is the answer. */
	while (nic_now_ns() < deadline) {
		if (nic_pathmtu_view(pm, version, addr, nic_now_ns(), &view) &&
		    !view.probing &&
		    (requested == -EALREADY || view.round_ns >= asked)) {
			learned_path_of(&view, path);
			return ok();
		}
		/* Not faster: each look takes the lock the workers share. */
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	return fail(NIC_STATUS_UNAVAILABLE,
		    "the round to %s did not end in time", address);
}

bool nic_control_pmtu_counters(void (*visit)(void *context, const char *name,
					     uint64_t value),
			       void *context)
{
	struct nic_pathmtu *pm = control.nic ? control.nic->pathmtu : NULL;
	struct nic_pmtu_stats stats;

	if (pm == NULL)
		return false;
	nic_pathmtu_get_stats(pm, &stats);
#define NIC_PMTU_VISIT(name) visit(context, #name, stats.name);
	NIC_PMTU_COUNTERS(NIC_PMTU_VISIT)
#undef NIC_PMTU_VISIT
	visit(context, "destinations_now", stats.destinations_now);
	visit(context, "learned_now", stats.learned_now);
	return true;
}
