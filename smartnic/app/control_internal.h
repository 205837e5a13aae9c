/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the parts of the control operations share: the state behind the
 * one lock (what the engines were told), the result helpers, and commands
 * to every worker (control.c). The operations themselves are in
 * control_config.c (info and configuration), control_paths.c (path MTUs,
 * static and discovered) and control_flows.c (onload, offload, the flow
 * list); statistics in control.c.
 */
#ifndef JUMBOGATE_NIC_CONTROL_INTERNAL_H
#define JUMBOGATE_NIC_CONTROL_INTERNAL_H

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

struct control_state {
	pthread_mutex_t lock;
	struct nic *nic;
	/* What the engines were told, for List* and for replaying onto new
	 * engines after a reconfiguration (the engine has no list calls). */
	struct nic_path_mtu_rule {
		struct jg_prefix prefix;
		uint16_t mtu;
	} * path_mtus;
	size_t path_mtu_count;
	/* The onloaded flows: at most the engines' pin budget, flows whose
	 * pins lapsed on every engine dropped when room is needed (and by
	 * ListFlows). */
	struct jg_flow_key *flows;
	/* When each listed flow was last onloaded (nic_now_ns, taken before
	 * the engines were told), in the order of flows. */
	uint64_t *flow_onloaded_ns;
	size_t flow_count;
	/* No pin of a listed flow can lapse before this time (0: unknown),
	 * from the oldest onload of the list at its last prune: until then
	 * a full list has no room to make, and a new flow is refused without
	 * asking the workers about every listed flow. Changes of the engines
	 * set it to 0. */
	uint64_t no_lapse_before_ns;
	/* Onloads refused here for want of room in the list; added to the
	 * engines' merge.onloads_refused in every report of it. */
	uint64_t onloads_refused;
	/* What the workers classify by (each holds its own copy). */
	struct nic_prefix_list internal;
};

/* Held under control_state.lock by every operation. */
extern struct control_state control_state;

struct nic_result control_ok(void);
struct nic_result control_fail(enum nic_status status, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/* Post one command per worker (commands[w] for worker w, all PENDING) and
 * wait for every answer (see control.c). */
struct nic_result control_post_and_wait(struct nic_command **commands);
/* Fill commands[] with one copy of template per worker. */
bool control_copy_command(const struct nic_command *template,
			  struct nic_command **commands);
/* The same command to every worker; answers land in commands[]. */
struct nic_result control_broadcast(const struct nic_command *template,
				    struct nic_command **commands);
void control_release(struct nic_command **commands);

/* Drop from the onload list the flows no engine of any worker holds a pin
 * for any more (control_flows.c); entries, when not NULL, gets the
 * counters of the flows that stay, in the list's order. */
struct nic_result control_prune_flows(struct nic_flow_entry *entries);

#endif /* JUMBOGATE_NIC_CONTROL_INTERNAL_H */
