/* SPDX-License-Identifier: Apache-2.0 */
/* Control operations: path MTUs, set by the controller and discovered. */
#include "control_internal.h"

/* ------------------------------------------------------------------ */
/* Path MTUs                                                           */

static size_t find_path_mtu(const struct jg_prefix *prefix)
{
	for (size_t i = 0; i < control_state.path_mtu_count; i++)
		if (nic_prefix_equal(&control_state.path_mtus[i].prefix,
				     prefix))
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
	uint32_t limit;
	size_t index;

	if (!nic_prefix_parse(cidr, &prefix, error, sizeof(error)))
		return control_fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	if (prefix.depth == 0)
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "%s covers every destination; set "
				    "default_path_mtu_v4 or _v6 with Configure "
				    "instead",
				    cidr);
	pthread_mutex_lock(&control_state.lock);
	/* Split packets leave by the Internet side: the smallest port. */
	limit = control_state.nic->options->smallest_port_mtu;
	if (mtu < NIC_MIN_PATH_MTU || mtu > limit) {
		result = control_fail(NIC_STATUS_INVALID_ARGUMENT,
				      "mtu %u for %s is outside %u..%u", mtu,
				      cidr, NIC_MIN_PATH_MTU, limit);
		goto out;
	}
	index = find_path_mtu(&prefix);
	if (index == SIZE_MAX) {
		uint32_t capacity = prefix.ip_version == 4
					    ? control_state.nic->engine_config
						      .pmtu_max_rules_v4
					    : control_state.nic->engine_config
						      .pmtu_max_rules_v6;
		size_t same_family = 0;
		void *grown;

		for (size_t i = 0; i < control_state.path_mtu_count; i++)
			same_family +=
				control_state.path_mtus[i].prefix.ip_version ==
				prefix.ip_version;
		if (same_family >= capacity) {
			result = control_fail(
				NIC_STATUS_RESOURCE_EXHAUSTED,
				"the IPv%u path-MTU table is full (%u "
				"prefixes)",
				prefix.ip_version, capacity);
			goto out;
		}
		grown = realloc(control_state.path_mtus,
				(control_state.path_mtu_count + 1) *
					sizeof(*control_state.path_mtus));
		if (grown == NULL) {
			result = control_fail(NIC_STATUS_INTERNAL,
					      "out of memory");
			goto out;
		}
		control_state.path_mtus = grown;
	}
	command.arg.pmtu.prefix = prefix;
	command.arg.pmtu.mtu = (uint16_t)mtu;
	result = control_broadcast(&command, commands);
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++)
		if (commands[w] && commands[w]->result < 0 &&
		    result.status == NIC_STATUS_OK)
			result = control_fail(
				NIC_STATUS_INTERNAL,
				"engine refused path MTU %u for %s: %s", mtu,
				cidr, strerror(-commands[w]->result));
	control_release(commands);
	if (result.status == NIC_STATUS_OK) {
		if (index == SIZE_MAX)
			index = control_state.path_mtu_count++;
		control_state.path_mtus[index].prefix = prefix;
		control_state.path_mtus[index].mtu = (uint16_t)mtu;
	}
out:
	pthread_mutex_unlock(&control_state.lock);
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
		return control_fail(NIC_STATUS_INVALID_ARGUMENT, "%s", error);
	pthread_mutex_lock(&control_state.lock);
	index = find_path_mtu(&prefix);
	if (index == SIZE_MAX) {
		result = control_fail(NIC_STATUS_NOT_FOUND,
				      "no path MTU is set for %s", cidr);
		goto out;
	}
	command.arg.pmtu.prefix = prefix;
	result = control_broadcast(&command, commands);
	control_release(commands);
	if (result.status == NIC_STATUS_OK) {
		control_state.path_mtus[index] =
			control_state.path_mtus[--control_state.path_mtu_count];
	}
out:
	pthread_mutex_unlock(&control_state.lock);
	return result;
}

struct nic_path_mtu_entry *nic_control_list_path_mtus(size_t *count)
{
	struct nic_path_mtu_entry *entries;

	pthread_mutex_lock(&control_state.lock);
	*count = control_state.path_mtu_count;
	entries = calloc(control_state.path_mtu_count + 1, sizeof(*entries));
	for (size_t i = 0; entries && i < control_state.path_mtu_count; i++) {
		nic_prefix_format(&control_state.path_mtus[i].prefix,
				  entries[i].cidr, sizeof(entries[i].cidr));
		entries[i].mtu = control_state.path_mtus[i].mtu;
	}
	if (entries == NULL)
		*count = 0;
	pthread_mutex_unlock(&control_state.lock);
	return entries;
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
	struct nic_pathmtu *pm =
		control_state.nic ? control_state.nic->pathmtu : NULL;
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
	struct nic_pathmtu *pm =
		control_state.nic ? control_state.nic->pathmtu : NULL;
	uint8_t addr[16] = {0};
	struct nic_pmtu_view view;
	uint8_t version;
	uint64_t asked, deadline;
	int requested;

	if (pm == NULL)
		return control_fail(
			NIC_STATUS_FAILED_PRECONDITION,
			"path MTU discovery is off (--pmtu-discovery on)");
	if (inet_pton(AF_INET, address, addr) == 1)
		version = 4;
	else if (inet_pton(AF_INET6, address, addr) == 1)
		version = 6;
	else
		return control_fail(NIC_STATUS_INVALID_ARGUMENT,
				    "'%s' is not an IPv4 or IPv6 address",
				    address);
	asked = nic_now_ns();
	requested = nic_pathmtu_request_round(pm, version, addr, exact);
	if (requested == -ENOENT)
		return control_fail(
			NIC_STATUS_NOT_FOUND,
			"no outbound traffic to %s seen yet: a probe goes "
			"out the way that traffic came, from its source",
			address);
	if (requested == -EBUSY)
		return control_fail(
			NIC_STATUS_UNAVAILABLE,
			"too many probes asked for at once; try again");
	/* A round, its second copy, and each refinement at most a round's
	 * timeout. */
	deadline =
		asked + ((2ull + (exact ? NIC_PMTU_MAX_REFINE_ROUNDS : 0)) *
				 control_state.nic->options->pmtu.timeout_ms +
			 control_state.nic->options->command_timeout_ms) *
				1000000ull;
	/* -EALREADY: a round is under way; its answer is the answer. */
	while (nic_now_ns() < deadline) {
		if (nic_pathmtu_view(pm, version, addr, nic_now_ns(), &view) &&
		    !view.probing &&
		    (requested == -EALREADY || view.round_ns >= asked)) {
			learned_path_of(&view, path);
			return control_ok();
		}
		/* Not faster: each look takes the lock the workers share. */
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	return control_fail(NIC_STATUS_UNAVAILABLE,
			    "the round to %s did not end in time", address);
}

bool nic_control_pmtu_counters(void (*visit)(void *context, const char *name,
					     uint64_t value),
			       void *context)
{
	struct nic_pathmtu *pm =
		control_state.nic ? control_state.nic->pathmtu : NULL;
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
