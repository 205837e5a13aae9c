/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program's own Prometheus endpoint (--metrics HOST:PORT): the data path
 * stays visible when no controller runs. GET /metrics answers the text
 * exposition format; anything else 404 or 405.
 *
 * Loopback only: the endpoint has no TLS and checks no caller, so it is
 * refused on any other address (a Prometheus on another host scrapes it
 * through a local agent or a TLS-terminating proxy, as it would node
 * exporter's). One request at a time, each given 2 s in all to arrive
 * (however slowly it trickles in) and 2 s in all to be sent: a client that
 * stalls delays the next scrape by at most that, holds no other resource,
 * and does not hold up jg_metrics_stop().
 */
#ifndef JUMBOGATE_METRICS_HTTP_H
#define JUMBOGATE_METRICS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The text of one scrape, grown as it is written. */
struct jg_metrics_text {
	char *data;
	size_t length;
	size_t capacity;
	bool failed; /* out of memory: the scrape answers 500 */
};

/* "# HELP" and "# TYPE" lines of a family (TYPE: "counter", "gauge"). */
void jg_metric_family(struct jg_metrics_text *text, const char *name,
		      const char *type, const char *help);
/* One sample. LABELS: NULL, or names and values alternating, ended by
 * NULL (values are escaped as the format asks). */
void jg_metric_sample(struct jg_metrics_text *text, const char *name,
		      uint64_t value, const char *const *labels);

typedef void (*jg_metrics_render_fn)(struct jg_metrics_text *text, void *arg);

/* Listens on ADDRESS (a loopback HOST:PORT) and answers scrapes from a
 * thread of its own with RENDER(ARG) and its own request counters
 * (PREFIX_metrics_requests_total{outcome}). False, with why in ERROR,
 * when the address is not loopback, its port is not 1..65535 (decimal)
 * or it cannot be bound. */
bool jg_metrics_start(const char *address, const char *prefix,
		      jg_metrics_render_fn render, void *arg, char *error,
		      size_t error_size);
void jg_metrics_stop(void);

#ifdef __cplusplus
}
#endif

#endif
