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
	pthread_mutex_lock(&control_state.lock);
	if (find_flow(&key) != SIZE_MAX)
		goto out; /* already onloaded: nothing to do */
	grown = realloc(control_state.flows,
			(control_state.flow_count + 1) *
				sizeof(*control_state.flows));
	if (grown == NULL) {
		result = control_fail(NIC_STATUS_INTERNAL, "out of memory");
		goto out;
	}
	control_state.flows = grown;
	/* The flow's packets reach whichever worker the port's hash picks,
	 * which the program cannot compute for every port type, so every
	 * worker's engines learn the flow. */
	command.arg.flow = key;
	result = control_broadcast(&command, commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++)
		refused |= commands[w] && commands[w]->result < 0;
	control_release(commands);
	if (result.status == NIC_STATUS_OK && refused) {
		struct nic_command undo = {.type = NIC_CMD_FLOW_OFFLOAD};

		undo.arg.flow = key;
		control_broadcast(&undo, commands);
		control_release(commands);
		result = control_fail(
			NIC_STATUS_RESOURCE_EXHAUSTED,
			"the flow table is full (max_flows %u)",
			control_state.nic->engine_config.max_flows);
	}
	if (result.status == NIC_STATUS_OK)
		control_state.flows[control_state.flow_count++] = key;
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
	if (result.status == NIC_STATUS_OK && index != SIZE_MAX)
		control_state.flows[index] =
			control_state.flows[--control_state.flow_count];
	pthread_mutex_unlock(&control_state.lock);
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

	if (!control_copy_command(&command, commands))
		return control_fail(NIC_STATUS_INTERNAL, "out of memory");
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		struct nic_command *c = commands[w];

		c->arg.flows.keys = malloc(count * sizeof(*c->arg.flows.keys));
		c->arg.flows.counters =
			calloc(count, sizeof(*c->arg.flows.counters));
		c->arg.flows.count = count;
		if (c->arg.flows.keys == NULL ||
		    c->arg.flows.counters == NULL) {
			for (unsigned int i = 0;
			     i < control_state.nic->worker_count; i++)
				nic_command_discard(commands[i]);
			return control_fail(NIC_STATUS_INTERNAL,
					    "out of memory");
		}
		memcpy(c->arg.flows.keys, &control_state.flows[first],
		       count * sizeof(*c->arg.flows.keys));
	}
	result = control_post_and_wait(commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
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
	pthread_mutex_lock(&control_state.lock);
	flows = control_state.flow_count;
	entries = calloc(flows + 1, sizeof(*entries));
	*result = entries ? control_ok()
			  : control_fail(NIC_STATUS_INTERNAL, "out of memory");
	for (size_t first = 0; result->status == NIC_STATUS_OK && first < flows;
	     first += FLOWS_PER_COMMAND)
		*result = count_flow_page(
			entries, first,
			RTE_MIN(flows - first, FLOWS_PER_COMMAND));
	for (size_t i = 0; result->status == NIC_STATUS_OK && i < flows; i++) {
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
		*count = flows;
	} else {
		free(entries);
		entries = NULL;
	}
	pthread_mutex_unlock(&control_state.lock);
	return entries;
}
