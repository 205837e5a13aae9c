/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The programs' log, through DPDK's rte_log: each part logs under a type of
 * its own ("jumbogate.switch", "jumbogate.port", ...) at a level, so an
 * operator turns one part up without the others.
 *
 * - At start: the EAL's option, e.g. --log-level=jumbogate.*:debug or
 *   --log-level=jumbogate.port:warning.
 * - At run time: the telemetry command /jumbogate/log_level (alone: every
 *   type and its level; with "PATTERN,LEVEL", e.g.
 *   "jumbogate.*,debug": sets the matching types), through DPDK's
 *   dpdk-telemetry.py with the program's --file-prefix.
 *
 * The lines go to standard error (jg_log_start): standard output keeps the
 * programs' machine-readable lines (ready, exit totals), and under systemd
 * the journal takes both. A program that cannot start says why on standard
 * error and exits; what a running program says goes through its types.
 */
#ifndef JUMBOGATE_LOG_H
#define JUMBOGATE_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_log.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Registers a log type NAME (at LEVEL, an RTE_LOG_* value, unless the
 * EAL's --log-level already named it) and returns its id, or
 * RTE_LOGTYPE_USER1 if DPDK refused it. */
int jg_log_register(const char *name, uint32_t level);

/* The runtime's own types. */
extern int jg_log_port;
extern int jg_log_grpc;

/* Registers /jumbogate/log_level (see above); PROGRAM names the caller in
 * the line printed if DPDK refuses the command. */
void jg_log_telemetry_register(const char *program);

/* After rte_eal_init: the log's lines go to standard error from now on
 * (DPDK's own default writes each to standard output and to syslog, which
 * the journal would then hold twice). */
void jg_log_start(void);

/* At most PER_SECOND lines a second for one kind of event an outsider can
 * cause (a refused call): jg_log_limited returns false for the rest, and
 * adds them to *suppressed, which the next line that passes reports. */
struct jg_log_limit {
	uint64_t second;
	uint32_t used;
	uint32_t suppressed;
};
bool jg_log_limited(struct jg_log_limit *limit, uint32_t per_second,
		    uint32_t *suppressed);

/* The level named NAME ("err", "warning", "info", "debug", ...) as an
 * RTE_LOG_* value, or 0 if it names none. */
uint32_t jg_log_level_from_name(const char *name);

#define JG_LOG(type, level, ...) rte_log(RTE_LOG_##level, (type), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
