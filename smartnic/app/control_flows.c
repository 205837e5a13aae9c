/* SPDX-License-Identifier: Apache-2.0 */
/* Control operations: flows onloaded and offloaded, and their list. */
#include "control_internal.h"

/* ListFlows asks the workers for this many flows per command, so that a
 * worker never spends more than a few tens of microseconds of its packet
 * loop on one request. */
#define FLOWS_PER_COMMAND 512u

/* ------------------------------------------------------------------ */
/* Flows                                                               */

static size_t find_flow(const struct jg_flow_key *key)
{
	for (size_t i = 0; i < control_state.flow_count; i++)
		if (nic_flow_key_equal(&control_state.flows[i], key))
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
		return control_fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	return control_ok();
}

/* The most flows the list holds: the pin budget of the engines
 * (--max-onloaded-flows, or a quarter of the flow table). */
static size_t flow_budget(void)
{
	return jg_engine_pin_budget(&control_state.nic->engine_config);
}

/* An engine dates a pin by its clock, which is at least the time taken
 * before the onload was posted, in units of 2^16 ns: a pin lapses no
 * earlier than onload_idle_s after that time, less one unit. The margin
 * covers that unit with room to spare. */
#define LAPSE_MARGIN_NS 1000000ull

/* The earliest time a pin of the list may lapse: onload_idle_s after its
 * oldest onload (see no_lapse_before_ns). */
static uint64_t earliest_lapse_ns(void)
{
	uint64_t idle_ns =
		(uint64_t)control_state.nic->engine_config.onload_idle_s *
		1000000000ull;
	uint64_t oldest = UINT64_MAX;

	for (size_t i = 0; i < control_state.flow_count; i++)
		if (control_state.flow_onloaded_ns[i] < oldest)
			oldest = control_state.flow_onloaded_ns[i];
	if (oldest == UINT64_MAX || oldest + idle_ns <= LAPSE_MARGIN_NS)
		return 0;
	return oldest + idle_ns - LAPSE_MARGIN_NS;
}

/* Each worker takes back what its onload changed (undo[w]; nothing on
 * a worker that refused, which took its own back). Best effort: a worker
 * that does not answer keeps a pin until it lapses. */
static void undo_onload(const struct jg_flow_key *key,
			const struct nic_onload_undo *undo)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_FLOW_ONLOAD_UNDO};

	command.arg.flow = *key;
	if (!control_copy_command(&command, commands))
		return;
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++)
		commands[w]->onload_undo = undo[w];
	(void)control_post_and_wait(commands);
	control_release(commands);
}

struct nic_result nic_control_onload(const char *src_ip, const char *dst_ip,
				     uint32_t protocol, uint32_t src_port,
				     uint32_t dst_port)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_command command = {.type = NIC_CMD_FLOW_ONLOAD};
	struct nic_onload_undo undo[NIC_MAX_WORKERS] = {0};
	struct nic_result result;
	struct jg_flow_key key;
	bool refused = false;
	uint64_t onloaded_ns;
	size_t index;
	void *grown;

	result = parse_flow(src_ip, dst_ip, protocol, src_port, dst_port, &key);
	if (result.status != NIC_STATUS_OK)
		return result;
	pthread_mutex_lock(&control_state.lock);
	if (control_state.nic == NULL) {
		result = control_fail(NIC_STATUS_UNAVAILABLE,
				      "the program is stopping");
		goto out;
	}
	/* A listed flow goes to the engines again: its pin may have lapsed
	 * (jg_flow_onload pins it anew, or refreshes a pin it holds). A new
	 * one needs room in the list, which flows whose pins lapsed on
	 * every engine make. */
	index = find_flow(&key);
	onloaded_ns = nic_now_ns();
	if (index == SIZE_MAX && control_state.flow_count >= flow_budget()) {
		/* Asking every worker about every listed flow costs one
		 * command per worker per 512 flows: not while no pin can
		 * have lapsed since the last answer. */
		if (onloaded_ns >= control_state.no_lapse_before_ns) {
			result = control_prune_flows(NULL);
			if (result.status != NIC_STATUS_OK)
				goto out;
		}
		if (control_state.flow_count >= flow_budget()) {
			control_state.onloads_refused++;
			result = control_fail(
				NIC_STATUS_RESOURCE_EXHAUSTED,
				"%zu flows are onloaded, as many as "
				"max_onloaded_flows allows, and none has been "
				"idle for onload_idle_s (%u s) on every engine",
				control_state.flow_count,
				control_state.nic->engine_config.onload_idle_s);
			goto out;
		}
	}
	if (index == SIZE_MAX) {
		grown = realloc(control_state.flows,
				(control_state.flow_count + 1) *
					sizeof(*control_state.flows));
		if (grown == NULL) {
			result = control_fail(NIC_STATUS_INTERNAL,
					      "out of memory");
			goto out;
		}
		control_state.flows = grown;
		grown = realloc(control_state.flow_onloaded_ns,
				(control_state.flow_count +
				 1) * sizeof(*control_state.flow_onloaded_ns));
		if (grown == NULL) {
			result = control_fail(NIC_STATUS_INTERNAL,
					      "out of memory");
			goto out;
		}
		control_state.flow_onloaded_ns = grown;
	}
	/* The flow's packets reach whichever worker the port's hash picks,
	 * which the program cannot compute for every port type, so every
	 * worker's engines learn the flow. */
	command.arg.flow = key;
	result = control_broadcast(&command, commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		refused |= commands[w] && commands[w]->result < 0;
		if (commands[w])
			undo[w] = commands[w]->onload_undo;
	}
	control_release(commands);
	if (result.status == NIC_STATUS_OK && refused) {
		/* A new flow is taken back where it was taken, each engine
		 * left as it was before (an offload would stop merging it
		 * where merge_unknown_flows merged it); a listed one stays
		 * listed, as onloaded as it was where its pin holds. */
		if (index == SIZE_MAX)
			undo_onload(&key, undo);
		result = control_fail(
			NIC_STATUS_RESOURCE_EXHAUSTED,
			"the flow table is full (max_flows %u)",
			control_state.nic->engine_config.max_flows);
	}
	/* A pin refreshed where it held is dated anew; where an engine
	 * refused a listed flow, none was given, so its date stays. */
	if (result.status == NIC_STATUS_OK && index != SIZE_MAX)
		control_state.flow_onloaded_ns[index] = onloaded_ns;
	if (result.status == NIC_STATUS_OK && index == SIZE_MAX) {
		control_state.flow_onloaded_ns[control_state.flow_count] =
			onloaded_ns;
		control_state.flows[control_state.flow_count++] = key;
	}
out:
	pthread_mutex_unlock(&control_state.lock);
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
	pthread_mutex_lock(&control_state.lock);
	/* Offload also releases a flow that was merged without being
	 * onloaded (merge_unknown_flows), so it goes to the engines even
	 * when the flow is not in the onload list. */
	command.arg.flow = key;
	result = control_broadcast(&command, commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++)
		if (commands[w])
			*flushed += commands[w]->packets;
	control_release(commands);
	index = find_flow(&key);
	if (result.status == NIC_STATUS_OK && index != SIZE_MAX) {
		control_state.flow_count--;
		control_state.flows[index] =
			control_state.flows[control_state.flow_count];
		control_state.flow_onloaded_ns[index] =
			control_state
				.flow_onloaded_ns[control_state.flow_count];
	}
	pthread_mutex_unlock(&control_state.lock);
	return result;
}

/* One command of this type to every worker, each with its own copy of
 * the keys (and, to count, its own answer arrays; see struct
 * nic_command), posted and waited for. */
static struct nic_result post_flows(enum nic_command_type type,
				    const struct jg_flow_key *keys,
				    size_t count, struct nic_command **commands)
{
	struct nic_command command = {.type = type};

	if (!control_copy_command(&command, commands))
		return control_fail(NIC_STATUS_INTERNAL, "out of memory");
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		struct nic_command *c = commands[w];
		bool answers = type == NIC_CMD_FLOW_COUNTERS;

		c->arg.flows.count = count;
		c->arg.flows.keys = malloc(count * sizeof(*c->arg.flows.keys));
		c->arg.flows.counters =
			answers ? calloc(count, sizeof(*c->arg.flows.counters))
				: NULL;
		c->arg.flows.pinned =
			answers ? calloc(count, sizeof(*c->arg.flows.pinned))
				: NULL;
		if (c->arg.flows.keys == NULL ||
		    (answers && (c->arg.flows.counters == NULL ||
				 c->arg.flows.pinned == NULL))) {
			for (unsigned int i = 0;
			     i < control_state.nic->worker_count; i++) {
				nic_command_discard(commands[i]);
				commands[i] = NULL;
			}
			return control_fail(NIC_STATUS_INTERNAL,
					    "out of memory");
		}
		memcpy(c->arg.flows.keys, keys,
		       count * sizeof(*c->arg.flows.keys));
	}
	return control_post_and_wait(commands);
}

static void discard_all(struct nic_command **commands)
{
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		nic_command_discard(commands[w]); /* NULL: the worker frees */
		commands[w] = NULL;
	}
}

/* Add the counters of flows [first, first + count) of the onload list
 * into entries (when not NULL), and mark in pinned[] the flows an engine
 * of any worker still holds the pin of. */
static struct nic_result query_flow_page(struct nic_flow_entry *entries,
					 bool *pinned, size_t first,
					 size_t count)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};
	struct nic_result result;

	result = post_flows(NIC_CMD_FLOW_COUNTERS, &control_state.flows[first],
			    count, commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		const struct nic_command *c = commands[w];

		if (c == NULL) /* abandoned: the worker frees it */
			continue;
		for (size_t i = 0; i < count; i++) {
			pinned[first + i] |= c->arg.flows.pinned[i];
			if (entries == NULL)
				continue;
			entries[first + i].packets_in +=
				c->arg.flows.counters[i].packets_in;
			entries[first + i].merged_packets +=
				c->arg.flows.counters[i].merged_packets;
		}
	}
	discard_all(commands);
	return result;
}

/* Tell the workers to drop the counters of flows that left the list;
 * best effort (a worker that does not answer keeps a few counters). */
static void forget_flows(const struct jg_flow_key *keys, size_t count)
{
	struct nic_command *commands[NIC_MAX_WORKERS] = {0};

	for (size_t first = 0; first < count; first += FLOWS_PER_COMMAND) {
		(void)post_flows(NIC_CMD_FLOW_FORGET, &keys[first],
				 RTE_MIN(count - first, FLOWS_PER_COMMAND),
				 commands);
		discard_all(commands);
	}
}

/*
 * Drop from the onload list the flows whose pin lapsed (--onload-idle-s
 * without traffic) on every engine of every worker: one engine that
 * holds it keeps the flow listed, since its traffic reaches one worker
 * and one port only. Asked 512 flows per command, and only when every
 * worker answered, since one that did not may hold pins. entries, when
 * not NULL, gets the counters of the listed flows, in the list's order.
 */
struct nic_result control_prune_flows(struct nic_flow_entry *entries)
{
	size_t flows = control_state.flow_count, kept = 0;
	struct nic_result result = control_ok();
	bool *pinned = calloc(flows + 1, sizeof(*pinned));

	if (pinned == NULL)
		return control_fail(NIC_STATUS_INTERNAL, "out of memory");
	for (size_t first = 0; result.status == NIC_STATUS_OK && first < flows;
	     first += FLOWS_PER_COMMAND)
		result = query_flow_page(
			entries, pinned, first,
			RTE_MIN(flows - first, FLOWS_PER_COMMAND));
	if (result.status != NIC_STATUS_OK) {
		free(pinned);
		return result;
	}
	/* Kept flows keep their order; the others gather behind them. */
	for (size_t i = 0; i < flows; i++) {
		struct jg_flow_key key = control_state.flows[i];
		uint64_t onloaded_ns = control_state.flow_onloaded_ns[i];

		if (!pinned[i])
			continue;
		control_state.flows[i] = control_state.flows[kept];
		control_state.flows[kept] = key;
		control_state.flow_onloaded_ns[i] =
			control_state.flow_onloaded_ns[kept];
		control_state.flow_onloaded_ns[kept] = onloaded_ns;
		if (entries != NULL)
			entries[kept] = entries[i];
		kept++;
	}
	control_state.flow_count = kept;
	control_state.no_lapse_before_ns = earliest_lapse_ns();
	forget_flows(&control_state.flows[kept], flows - kept);
	free(pinned);
	return result;
}

struct nic_flow_entry *nic_control_list_flows(size_t *count,
					      struct nic_result *result)
{
	struct nic_flow_entry *entries;

	*count = 0;
	pthread_mutex_lock(&control_state.lock);
	entries = calloc(control_state.flow_count + 1, sizeof(*entries));
	*result = entries ? control_prune_flows(entries)
			  : control_fail(NIC_STATUS_INTERNAL, "out of memory");
	for (size_t i = 0;
	     result->status == NIC_STATUS_OK && i < control_state.flow_count;
	     i++) {
		const struct jg_flow_key *key = &control_state.flows[i];
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
		*count = control_state.flow_count;
	} else {
		free(entries);
		entries = NULL;
	}
	pthread_mutex_unlock(&control_state.lock);
	return entries;
}
