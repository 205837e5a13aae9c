/* SPDX-License-Identifier: Apache-2.0 */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcap/pcap.h>

#include "bench_stream.h"
#include "packet_builder.h"

/* Ethernet preamble + start delimiter 8, FCS 4, inter-frame gap 12. */
#define WIRE_OVERHEAD_BYTES 24u
#define PATTERN_BYTES	    (1u << 16)
#define TCP_TIMESTAMP_BYTES 12u
/* Packets between steps of the senders' TCP timestamp clock, about a
 * millisecond at 25 Gbps, so timestamps change as they do on the wire. */
#define TIMESTAMP_TICK_PACKETS 2048u
#define MAX_REORDER_DISTANCE   8u
#define MOUSE_MIN_PAYLOAD      64u
#define MOUSE_MAX_PAYLOAD      1024u
#define MAX_MSS		       9000u

void trace_params_default(struct trace_params *p)
{
	memset(p, 0, sizeof(*p));
	p->flows = 800;
	p->packets = 600000;
	p->train = 45;
	p->concurrency = 8;
	p->mss = 1448;
	p->line_gbps = 25.0;
	p->seed = 1;
}

uint64_t trace_wire_ns(uint32_t frame_length, double line_gbps)
{
	return (uint64_t)((frame_length + WIRE_OVERHEAD_BYTES) * 8.0 /
			  line_gbps);
}

static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static double uniform(uint64_t *state)
{
	return (double)(next_random(state) >> 11) / (double)(1ull << 53);
}

/* One packet to build: flow and its place in the flow's stream. */
struct event {
	uint32_t flow; /* elephants first, then mice */
	uint32_t offset;
	uint16_t length;
	uint16_t ip_id;
	uint8_t flags;
	uint32_t tick;
};

struct flow_state {
	uint32_t offset;
	uint16_t ip_id;
	bool active;
};

static void flow_address(uint32_t flow, const struct trace_params *params,
			 struct pb_spec *spec)
{
	uint64_t mixed = (flow + 1) * 0x9e3779b97f4a7c15ull;
	bool ipv6 = (double)(mixed >> 11) / (double)(1ull << 53) <
		    params->ipv6_share;

	pb_defaults(spec, ipv6 ? 6 : 4);
	/* Internet side: 198.18.0.0/15 (benchmarking), one address per
	 * 60000 flows; rack side: one host, a port per flow. */
	spec->src_v4 = 0xc6120000u + flow / 60000u;
	spec->src_v6[12] = (uint8_t)(flow >> 24);
	spec->src_v6[13] = (uint8_t)(flow >> 16);
	spec->src_v6[14] = (uint8_t)(flow >> 8);
	spec->src_v6[15] = (uint8_t)flow;
	spec->src_port = 443;
	spec->dst_port = (uint16_t)(1024u + flow % 60000u);
	spec->seq = (uint32_t)(mixed >> 32);
	spec->ack = (uint32_t)mixed;
	spec->window = 2048;
}

static uint32_t generate_events(const struct trace_params *params,
				struct event *events, uint64_t *rng)
{
	uint32_t concurrency = params->concurrency;
	struct flow_state *flows = calloc(params->flows, sizeof(*flows));
	uint32_t *active_flow = calloc(concurrency, sizeof(uint32_t));
	uint32_t *active_left = calloc(concurrency, sizeof(uint32_t));
	uint64_t elephants_left = params->packets, mice_left = params->mice;
	uint32_t count = 0, next_mouse = params->flows;

	if (flows == NULL || active_flow == NULL || active_left == NULL) {
		count = UINT32_MAX;
		goto out;
	}
	for (uint32_t slot = 0; slot < concurrency; slot++)
		active_left[slot] = 0;
	while (elephants_left + mice_left > 0) {
		uint32_t tick = count / TIMESTAMP_TICK_PACKETS;

		if (uniform(rng) * (double)(elephants_left + mice_left) <
		    (double)mice_left) {
			uint32_t segments = 1 + next_random(rng) % 3;
			uint32_t offset = 0;

			for (uint32_t k = 0; k < segments; k++) {
				uint16_t length =
					(uint16_t)(MOUSE_MIN_PAYLOAD +
						   next_random(rng) %
							   (MOUSE_MAX_PAYLOAD -
							    MOUSE_MIN_PAYLOAD));

				events[count++] = (struct event){
					.flow = next_mouse,
					.offset = offset,
					.length = length,
					.ip_id = (uint16_t)k,
					.flags = k + 1 == segments
							 ? PB_TCP_ACK |
								   PB_TCP_PSH
							 : PB_TCP_ACK,
					.tick = tick,
				};
				offset += length;
			}
			next_mouse++;
			mice_left--;
			continue;
		}
		uint32_t slot = (uint32_t)(next_random(rng) % concurrency);

		if (active_left[slot] == 0) {
			uint32_t flow;

			/* concurrency <= flows, so a free flow exists. */
			do
				flow = (uint32_t)(next_random(rng) %
						  params->flows);
			while (flows[flow].active);
			flows[flow].active = true;
			active_flow[slot] = flow;
			active_left[slot] = params->train;
		}
		struct flow_state *f = &flows[active_flow[slot]];

		elephants_left--;
		if (uniform(rng) >= params->loss)
			events[count++] = (struct event){
				.flow = active_flow[slot],
				.offset = f->offset,
				.length = (uint16_t)params->mss,
				.ip_id = f->ip_id,
				.flags = PB_TCP_ACK,
				.tick = tick,
			};
		f->offset += params->mss;
		f->ip_id++;
		if (--active_left[slot] == 0)
			f->active = false;
	}
	for (uint32_t i = 0; i < count; i++) {
		if (uniform(rng) >= params->reorder)
			continue;
		uint32_t j =
			i + 1 +
			(uint32_t)(next_random(rng) % MAX_REORDER_DISTANCE);

		if (j < count) {
			struct event t = events[i];

			events[i] = events[j];
			events[j] = t;
		}
	}
out:
	free(flows);
	free(active_flow);
	free(active_left);
	return count;
}

static bool reserve(struct trace *t, uint32_t packets, uint64_t bytes)
{
	t->packets = calloc(packets, sizeof(*t->packets));
	t->bytes = malloc(bytes);
	t->capacity = packets;
	t->bytes_capacity = bytes;
	return t->packets != NULL && t->bytes != NULL;
}

bool trace_generate(struct trace *t, const struct trace_params *params)
{
	struct trace_params p = *params;
	uint64_t rng = p.seed * 0x2545f4914f6cdd1dull + 1, time_ns = 0;
	uint64_t max_events = p.packets + 3ull * p.mice;
	uint8_t *pattern = malloc(PATTERN_BYTES + MAX_MSS);
	struct event *events = calloc(max_events, sizeof(*events));
	uint32_t count;

	memset(t, 0, sizeof(*t));
	if (p.flows == 0)
		p.flows = 1;
	if (p.concurrency == 0)
		p.concurrency = 1;
	if (p.concurrency > p.flows)
		p.concurrency = p.flows;
	if (p.train == 0)
		p.train = 1;
	if (pattern == NULL || events == NULL || max_events > UINT32_MAX ||
	    p.mss == 0 || p.mss > MAX_MSS)
		goto fail;
	for (uint32_t i = 0; i < PATTERN_BYTES + MAX_MSS; i++)
		pattern[i] = (uint8_t)(next_random(&rng) >> 24);
	count = generate_events(&p, events, &rng);
	if (count == UINT32_MAX)
		goto fail;
	/* Headers are at most 14 + 40 + 20 + 12 bytes. */
	if (!reserve(t, count,
		     (uint64_t)count * 96 + p.packets * p.mss +
			     p.mice * 3ull * MOUSE_MAX_PAYLOAD))
		goto fail;
	for (uint32_t i = 0; i < count; i++) {
		const struct event *ev = &events[i];
		struct pb_spec spec;

		flow_address(ev->flow, &p, &spec);
		spec.seq += ev->offset;
		spec.ip_id = (uint16_t)(spec.ip_id + ev->ip_id);
		spec.tcp_flags = ev->flags;
		/* NOP, NOP, timestamps: what Linux sends on every segment. */
		spec.tcp_options_length = TCP_TIMESTAMP_BYTES;
		spec.tcp_options[0] = 1;
		spec.tcp_options[1] = 1;
		spec.tcp_options[2] = 8;
		spec.tcp_options[3] = 10;
		spec.tcp_options[7] = (uint8_t)ev->tick;
		spec.tcp_options[6] = (uint8_t)(ev->tick >> 8);
		spec.tcp_options[5] = (uint8_t)(ev->tick >> 16);
		spec.payload = pattern +
			       (ev->offset + ev->flow * 131u) % PATTERN_BYTES;
		spec.payload_length = ev->length;

		struct trace_packet *tp = &t->packets[i];

		tp->offset = t->bytes_used;
		tp->length = pb_frame(&spec, t->bytes + t->bytes_used);
		t->bytes_used += tp->length;
		time_ns += trace_wire_ns(tp->length, p.line_gbps);
		tp->time_ns = time_ns;
	}
	t->count = count;
	t->flows = p.flows + p.mice;
	free(events);
	free(pattern);
	return true;
fail:
	free(events);
	free(pattern);
	trace_free(t);
	return false;
}

static int compare_keys(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct IP flows (version, addresses, ports) of a loaded capture: the
 * header line used to say "0 flows" for every replay. */
static uint32_t count_flows(const struct trace *t)
{
	uint64_t *keys = malloc((size_t)t->count * sizeof(*keys) + 1);
	uint32_t n = 0, flows = 0;

	if (keys == NULL)
		return 0;
	for (uint32_t i = 0; i < t->count; i++) {
		struct bench_headers h;

		if (bench_parse_frame(t->bytes + t->packets[i].offset,
				      t->packets[i].length, &h))
			keys[n++] = h.flow_key;
	}
	qsort(keys, n, sizeof(*keys), compare_keys);
	for (uint32_t i = 0; i < n; i++)
		flows += i == 0 || keys[i] != keys[i - 1];
	free(keys);
	return flows;
}

bool trace_load_pcap(struct trace *t, const char *path, double line_gbps)
{
	char error[PCAP_ERRBUF_SIZE];
	pcap_t *pcap = pcap_open_offline(path, error);
	struct pcap_pkthdr *header;
	const u_char *data;
	uint64_t first_ns = 0, time_ns = 0;
	int status;

	memset(t, 0, sizeof(*t));
	if (pcap == NULL) {
		fprintf(stderr, "%s: %s\n", path, error);
		return false;
	}
	if (pcap_datalink(pcap) != DLT_EN10MB) {
		fprintf(stderr, "%s: not an Ethernet capture\n", path);
		pcap_close(pcap);
		return false;
	}
	while ((status = pcap_next_ex(pcap, &header, &data)) == 1) {
		uint64_t ns = (uint64_t)header->ts.tv_sec * 1000000000ull +
			      (uint64_t)header->ts.tv_usec * 1000ull;

		if (header->caplen < header->len || header->caplen < 14)
			continue; /* truncated: no way to replay it */
		if (t->count == t->capacity) {
			uint32_t capacity =
				t->capacity ? 2 * t->capacity : 4096;
			void *p = realloc(t->packets,
					  capacity * sizeof(*t->packets));

			if (p == NULL)
				goto fail;
			t->packets = p;
			t->capacity = capacity;
		}
		while (t->bytes_used + header->caplen > t->bytes_capacity) {
			uint64_t capacity = t->bytes_capacity
						    ? 2 * t->bytes_capacity
						    : 1u << 22;
			void *p = realloc(t->bytes, capacity);

			if (p == NULL)
				goto fail;
			t->bytes = p;
			t->bytes_capacity = capacity;
		}
		if (t->count == 0)
			first_ns = ns;
		struct trace_packet *tp = &t->packets[t->count++];

		memcpy(t->bytes + t->bytes_used, data, header->caplen);
		tp->offset = t->bytes_used;
		tp->length = header->caplen;
		t->bytes_used += header->caplen;
		if (line_gbps > 0) {
			time_ns += trace_wire_ns(tp->length, line_gbps);
			tp->time_ns = time_ns;
		} else {
			/* Captures are not always in time order. */
			tp->time_ns = ns > first_ns ? ns - first_ns : 0;
			if (t->count > 1 && tp->time_ns < tp[-1].time_ns)
				tp->time_ns = tp[-1].time_ns;
		}
	}
	if (status == PCAP_ERROR) {
		fprintf(stderr, "%s: %s\n", path, pcap_geterr(pcap));
		goto fail;
	}
	pcap_close(pcap);
	t->flows = count_flows(t);
	return t->count > 0;
fail:
	pcap_close(pcap);
	trace_free(t);
	return false;
}

void trace_free(struct trace *t)
{
	free(t->packets);
	free(t->bytes);
	memset(t, 0, sizeof(*t));
}
