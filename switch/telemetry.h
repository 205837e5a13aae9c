/* SPDX-License-Identifier: Apache-2.0 */
#ifndef JUMBOGATE_SWITCH_TELEMETRY_H
#define JUMBOGATE_SWITCH_TELEMETRY_H

#include "switch.h"

struct sw_totals {
	uint64_t packets_in;  /* port_rx, all ports */
	uint64_t packets_out; /* port_tx, all ports */
	struct sw_internal_counters internal;
};

/* Summed over the workers: the exit line and /jumbogate-switch/stats. */
void sw_totals(const struct sw_switch *sw, struct sw_totals *totals);

struct jg_metrics_text;
/* The --metrics endpoint's scrape of SW (metrics.c). */
void sw_metrics_render(struct jg_metrics_text *text, void *sw);

/* Registers the /jumbogate-switch/ telemetry commands (see telemetry.c). */
void sw_telemetry_register(const struct sw_switch *sw);

#endif /* JUMBOGATE_SWITCH_TELEMETRY_H */
