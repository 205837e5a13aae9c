/* SPDX-License-Identifier: Apache-2.0 */
/* The control operations (control.h): their shared state and helpers,
 * and commands to every worker; statistics. See control_internal.h for the
 * other parts. */
#include "control_internal.h"

struct control_state control_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

struct nic_result control_ok(void)
{
	struct nic_result result = {.status = NIC_STATUS_OK};
	return result;
}

struct nic_result control_fail(enum nic_status status, const char *format, ...)
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

	control_state.nic = nic;
	control_state.internal.count = options->internal_prefix_count;
	memcpy(control_state.internal.prefixes, options->internal_prefixes,
	       sizeof(control_state.internal.prefixes));
	control_state.path_mtu_count = 0;
	control_state.path_mtus = calloc(options->path_mtu_count + 1,
					 sizeof(*control_state.path_mtus));
	for (unsigned int i = 0; i < options->path_mtu_count; i++) {
		size_t j;

		/* A later --path-mtu for the same prefix replaced it. */
		for (j = 0; j < control_state.path_mtu_count; j++)
			if (nic_prefix_equal(&control_state.path_mtus[j].prefix,
					     &options->path_mtus[i].prefix))
				break;
		control_state.path_mtus[j].prefix =
			options->path_mtus[i].prefix;
		control_state.path_mtus[j].mtu = options->path_mtus[i].mtu;
		if (j == control_state.path_mtu_count)
			control_state.path_mtu_count++;
	}
}

void nic_control_fini(void)
{
	pthread_mutex_lock(&control_state.lock);
	free(control_state.path_mtus);
	free(control_state.flows);
	free(control_state.flow_onloaded_ns);
	control_state.path_mtus = NULL;
	control_state.flows = NULL;
	control_state.flow_onloaded_ns = NULL;
	control_state.path_mtu_count = control_state.flow_count = 0;
	control_state.nic = NULL;
	pthread_mutex_unlock(&control_state.lock);
}

/* ------------------------------------------------------------------ */
/* Commands to every worker                                            */

static void sleep_briefly(void)
{
	const struct timespec pause = {.tv_nsec = 20000};
	nanosleep(&pause, NULL);
}

/* A worker polls its ring between bursts and sleeps at most
 * --idle-sleep-max-us, so an answer later than --command-timeout-ms means
 * it is stuck. */

/*
 * Post one command per worker (commands[w] for worker w, all PENDING) and
 * wait for every answer. A command a worker has not answered in time is
 * abandoned to the worker, which frees it, and its slot becomes NULL.
 */
struct nic_result control_post_and_wait(struct nic_command **commands)
{
	struct nic *nic = control_state.nic;
	struct nic_result result = control_ok();
	uint64_t deadline;

	if (nic == NULL || atomic_load(&nic->stop)) {
		for (unsigned int w = 0; nic && w < nic->worker_count; w++) {
			nic_command_discard(commands[w]);
			commands[w] = NULL;
		}
		return control_fail(NIC_STATUS_UNAVAILABLE,
				    "the program is stopping");
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
			result = control_fail(
				NIC_STATUS_UNAVAILABLE,
				"worker %u has %u requests it has not "
				"taken",
				w, rte_ring_count(nic->workers[w].commands));
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
				result = control_fail(
					NIC_STATUS_UNAVAILABLE,
					"worker %u did not answer within "
					"%u ms",
					w, nic->options->command_timeout_ms);
		}
	}
	return result;
}

/* Fill commands[] with one copy of template per worker. */
bool control_copy_command(const struct nic_command *template,
			  struct nic_command **commands)
{
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
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
struct nic_result control_broadcast(const struct nic_command *template,
				    struct nic_command **commands)
{
	if (control_state.nic == NULL)
		return control_fail(NIC_STATUS_UNAVAILABLE,
				    "the program is stopping");
	if (!control_copy_command(template, commands))
		return control_fail(NIC_STATUS_INTERNAL, "out of memory");
	return control_post_and_wait(commands);
}

void control_release(struct nic_command **commands)
{
	for (unsigned int w = 0; w < control_state.nic->worker_count; w++) {
		free(commands[w]);
		commands[w] = NULL;
	}
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
	uint64_t onloads_refused;

	memset(totals, 0, sizeof(*totals));
	pthread_mutex_lock(&control_state.lock);
	if (control_state.nic == NULL) {
		pthread_mutex_unlock(&control_state.lock);
		return control_fail(NIC_STATUS_UNAVAILABLE,
				    "the program is stopping");
	}
	result = control_broadcast(&command, commands);
	if (result.status == NIC_STATUS_OK)
		for (unsigned int w = 0; w < control_state.nic->worker_count;
		     w++)
			snapshots[count++] = commands[w]->snapshot;
	control_release(commands);
	onloads_refused = control_state.onloads_refused;
	pthread_mutex_unlock(&control_state.lock);
	if (result.status == NIC_STATUS_OK) {
		nic_totals_compute(totals, snapshots, count);
		/* Refused by the onload list, before any engine saw them. */
		totals->engine.merge.onloads_refused += onloads_refused;
	}
	return result;
}
