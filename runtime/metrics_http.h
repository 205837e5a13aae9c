/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program's own Prometheus endpoint (--metrics HOST:PORT): the data path
 * stays visible when no controller runs. GET /metrics answers the text
 * exposition format; anything else 404 or 405.
 *
 * Loopback only: the endpoint has no TLS and checks no caller, so it is
 * refused on any other address (a Prometheus on another host scrapes it
 * through a local agent or a TLS-terminating proxy, as it would node
 * exporter's). One thread polls up to JG_METRICS_CONNECTIONS connections at
 * once, each given 2 s in all for its request to arrive (however slowly it
 * trickles in) and 2 s in all for its answer to be sent, and answers
 * whichever request is whole: clients that stall or drip bytes do not delay
 * a scrape, and none holds up jg_metrics_stop(). A connection beyond the
 * bound closes the oldest one still sending its request (or, when all are
 * being answered, the oldest), counted in
 * PREFIX_metrics_connections_evicted_total: a flood of idle connections
 * cannot keep the next scrape out.
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

/* Connections served at once. */
#define JG_METRICS_CONNECTIONS 16
/* The longest request head read; the rest of a longer one is not. */
#define JG_METRICS_REQUEST_MAX 4096

/* A request head as it arrives, read without a socket by the fuzz target
 * and the tests as by the endpoint. */
struct jg_metrics_request_head {
	char bytes[JG_METRICS_REQUEST_MAX + 1]; /* NUL after `used` */
	size_t used;
};

enum jg_metrics_request {
	JG_METRICS_SCRAPE,	/* GET /metrics */
	JG_METRICS_NOT_FOUND,	/* GET of any other path */
	JG_METRICS_BAD_REQUEST, /* not a GET, or no whole request line */
};

/* Takes LENGTH more bytes, received at bytes + used (at most
 * JG_METRICS_REQUEST_MAX - used of them). True when the head is whole (a
 * blank line ends it) or fills the buffer: it is answered now. A NUL in
 * the head ends what is read of it. */
bool jg_metrics_head_received(struct jg_metrics_request_head *head,
			      size_t length);
/* What the head asks for; a head cut short is judged on what arrived. */
enum jg_metrics_request
jg_metrics_head_route(const struct jg_metrics_request_head *head);

typedef void (*jg_metrics_render_fn)(struct jg_metrics_text *text, void *arg);

/* Listens on ADDRESS (a loopback HOST:PORT) and answers scrapes from a
 * thread of its own with RENDER(ARG) and its own counters
 * (PREFIX_metrics_requests_total{outcome},
 * PREFIX_metrics_connections_evicted_total). False, with why in ERROR,
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
