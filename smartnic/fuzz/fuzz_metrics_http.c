/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the metrics endpoint's request reading and routing
 * (runtime/metrics_http.c, jg_metrics_head_received and _route), fed a
 * request as recv could hand it over, and its label escaping
 * (jg_metric_sample) fed the input as a label value.
 *
 * Input: the first byte chooses how the rest arrives, in chunks of
 * (byte % 16) + 1 bytes; the rest is what the client sends. Checked
 * besides the sanitizers: the head never outgrows its buffer; how the
 * bytes are cut never changes the answer (the routing only looks at the
 * request line, which a whole head holds however it arrived); a label
 * value read back from its escaped sample is the value.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_http.h"
#include "replay.h"

#define LABEL_MAX 1024

static struct jg_metrics_request_head chunked, whole;

/* Feeds BYTES as the endpoint reads them, CHUNK at a time, until the head
 * is answered or the client has sent all; the route it is answered with. */
static enum jg_metrics_request
read_request(struct jg_metrics_request_head *head, const uint8_t *bytes,
	     size_t size, size_t chunk)
{
	head->used = 0;
	head->bytes[0] = '\0';
	while (size > 0) {
		size_t room = JG_METRICS_REQUEST_MAX - head->used;
		size_t got = size < chunk ? size : chunk;

		if (got > room)
			got = room;
		memcpy(head->bytes + head->used, bytes, got);
		bytes += got;
		size -= got;
		bool answered = jg_metrics_head_received(head, got);
		if (head->used > JG_METRICS_REQUEST_MAX ||
		    head->bytes[head->used] != '\0') {
			fprintf(stderr, "the head outgrew its buffer: %zu\n",
				head->used);
			abort();
		}
		if (answered)
			break;
	}
	return jg_metrics_head_route(head);
}

/* The sample's label value, unescaped; false if the sample is not one
 * line of the form m{l="..."} 1. */
static bool read_back_label(const char *sample, size_t length, char *value)
{
	static const char start[] = "m{l=\"", end[] = "\"} 1\n";

	if (length < sizeof(start) - 1 + sizeof(end) - 1 ||
	    memcmp(sample, start, sizeof(start) - 1) != 0 ||
	    memcmp(sample + length - (sizeof(end) - 1), end, sizeof(end) - 1) !=
		    0)
		return false;
	for (size_t i = sizeof(start) - 1; i < length - (sizeof(end) - 1);
	     i++) {
		char c = sample[i];

		if (c == '\n' || c == '"')
			return false; /* unescaped: the line or value ends */
		if (c == '\\') {
			c = sample[++i];
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return false;
		}
		*value++ = c;
	}
	*value = '\0';
	return true;
}

static void check_label(const uint8_t *data, size_t size)
{
	char value[LABEL_MAX + 1], back[LABEL_MAX + 1];
	size_t length = size < LABEL_MAX ? size : LABEL_MAX;
	struct jg_metrics_text text = {0};

	memcpy(value, data, length);
	value[length] = '\0';
	const char *labels[] = {"l", value, NULL};
	jg_metric_sample(&text, "m", 1, labels);
	if (!text.failed && (!read_back_label(text.data, text.length, back) ||
			     strcmp(back, value) != 0)) {
		fprintf(stderr, "label value not escaped: %.*s\n",
			(int)text.length, text.data);
		abort();
	}
	free(text.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)(data[0] % 16) + 1;
	enum jg_metrics_request cut =
		read_request(&chunked, data + 1, size - 1, chunk);
	enum jg_metrics_request at_once =
		read_request(&whole, data + 1, size - 1, size);

	if (cut != at_once) {
		fprintf(stderr,
			"in %zu-byte chunks the request is %d, at once %d\n",
			chunk, (int)cut, (int)at_once);
		abort();
	}
	if (at_once == JG_METRICS_SCRAPE &&
	    strncmp(whole.bytes, "GET /metrics", 12) != 0) {
		fprintf(stderr, "a scrape of something else: %.40s\n",
			whole.bytes);
		abort();
	}
	check_label(data + 1, size - 1);
	return 0;
}

int fuzz_write_seeds(const char *dir)
{
	(void)dir;
	fprintf(stderr, "this target's seeds are the committed text files "
			"of corpus-metrics-http/\n");
	return 1;
}
