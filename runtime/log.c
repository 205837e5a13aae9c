/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_telemetry.h>

#include "pool_telemetry.h"

/* Every type a program registered, for the telemetry command to list: DPDK
 * offers no lookup of a type's name. A program has a handful. */
#define MAX_TYPES 16

static struct {
	char name[48];
	int id;
} types[MAX_TYPES];
static unsigned int type_count;

static const char *const LEVEL_NAMES[] = {
	[RTE_LOG_EMERG] = "emerg",     [RTE_LOG_ALERT] = "alert",
	[RTE_LOG_CRIT] = "crit",       [RTE_LOG_ERR] = "err",
	[RTE_LOG_WARNING] = "warning", [RTE_LOG_NOTICE] = "notice",
	[RTE_LOG_INFO] = "info",       [RTE_LOG_DEBUG] = "debug",
};

int jg_log_port = RTE_LOGTYPE_USER1;
int jg_log_grpc = RTE_LOGTYPE_USER1;

int jg_log_register(const char *name, uint32_t level)
{
	int id = rte_log_register_type_and_pick_level(name, level);

	if (id < 0)
		return RTE_LOGTYPE_USER1;
	for (unsigned int i = 0; i < type_count; i++)
		if (types[i].id == id)
			return id;
	if (type_count < MAX_TYPES) {
		snprintf(types[type_count].name, sizeof(types[0].name), "%s",
			 name);
		types[type_count++].id = id;
	}
	return id;
}

/* Registered before main, so the EAL's --log-level finds them. */
RTE_INIT(jg_log_runtime_types)
{
	jg_log_port = jg_log_register("jumbogate.port", RTE_LOG_INFO);
	jg_log_grpc = jg_log_register("jumbogate.grpc", RTE_LOG_INFO);
}

void jg_log_start(void)
{
	rte_openlog_stream(stderr);
}

/* Called from gRPC's threads: one lock, taken only on the logging path. */
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

bool jg_log_limited(struct jg_log_limit *limit, uint32_t per_second,
		    uint32_t *suppressed)
{
	struct timespec now;
	bool pass;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&limit_lock);
	if ((uint64_t)now.tv_sec != limit->second) {
		limit->second = (uint64_t)now.tv_sec;
		limit->used = 0;
	}
	pass = limit->used < per_second;
	if (pass) {
		limit->used++;
		*suppressed = limit->suppressed;
		limit->suppressed = 0;
	} else {
		limit->suppressed++;
	}
	pthread_mutex_unlock(&limit_lock);
	return pass;
}

uint32_t jg_log_level_from_name(const char *name)
{
	for (uint32_t level = RTE_LOG_EMERG; level <= RTE_LOG_DEBUG; level++)
		if (strcmp(name, LEVEL_NAMES[level]) == 0)
			return level;
	return 0;
}

/* "TYPE:LEVEL" strings, as --log-level spells them: telemetry's dict keys
 * may not hold the '.' of the type names. */
static void add_levels(struct rte_tel_data *d)
{
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	for (unsigned int i = 0; i < type_count; i++) {
		int level = rte_log_get_level((uint32_t)types[i].id);
		char entry[RTE_TEL_MAX_STRING_LEN];

		snprintf(entry, sizeof(entry), "%.47s:%.7s", types[i].name,
			 level >= (int)RTE_LOG_EMERG &&
					 level <= (int)RTE_LOG_DEBUG
				 ? LEVEL_NAMES[level]
				 : "unknown");
		rte_tel_data_add_array_string(d, entry);
	}
}

static int refuse(struct rte_tel_data *d, const char *why)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", why);
	return 0;
}

/* "/jumbogate/log_level": the levels; ",PATTERN,LEVEL" sets them first.
 * An unknown level or a pattern that matches none of the program's types
 * answers {"error": ...} instead and changes nothing. */
static int log_level_command(const char *command, const char *params,
			     struct rte_tel_data *d)
{
	(void)command;
	if (params != NULL && params[0] != '\0') {
		char pattern[64];
		const char *comma = strchr(params, ',');
		uint32_t level;
		bool matched = false;

		if (comma == NULL ||
		    (size_t)(comma - params) >= sizeof(pattern))
			return refuse(d, "give PATTERN,LEVEL");
		memcpy(pattern, params, (size_t)(comma - params));
		pattern[comma - params] = '\0';
		level = jg_log_level_from_name(comma + 1);
		if (level == 0)
			return refuse(d, "level: emerg, alert, crit, err, "
					 "warning, notice, info or debug");
		for (unsigned int i = 0; i < type_count; i++)
			matched |= fnmatch(pattern, types[i].name, 0) == 0;
		if (!matched)
			return refuse(d, "the pattern names no log type");
		rte_log_set_level_pattern(pattern, level);
	}
	add_levels(d);
	return 0;
}

void jg_log_telemetry_register(const char *program)
{
	jg_telemetry_register(program, "/jumbogate/log_level",
			      log_level_command,
			      "the log types and their levels; with "
			      "PATTERN,LEVEL sets them first");
}
