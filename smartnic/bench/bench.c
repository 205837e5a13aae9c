/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-bench: one in-memory trace, fed on one core through
 *   engine      jumbogate's merge (jg_merge_burst + jg_merge_timer),
 *   gro         DPDK rte_gro_reassemble_burst (lightweight, per burst),
 *   gro-timed   DPDK rte_gro_reassemble + rte_gro_timeout_flush
 *               (heavyweight, flushed at the engine's delay bound),
 *   pass        parse each packet's headers and return it untouched: the
 *               per-core limit of packet handling on this machine.
 *
 * Every path gets the same packets as fresh mbufs, built outside the
 * timed region in chunks (as a NIC would have written them), with the
 * RX checksum flags a NIC sets. The timed region is the path's own call
 * plus freeing what it returns, which stands in for transmission.
 *
 * Time inside the paths is virtual: packets arrive at the trace's times
 * (the generator spaces them at a line rate), are taken in bursts of 32,
 * and each burst is handed over at the arrival time of its last packet.
 * Before each burst, timers that fell due since the previous one are run
 * at their own deadline, as an idle poll would. The delay of an input is
 * the virtual time of the call that returned it minus the time of the
 * call that took it, so it is the delay the path adds, the same however
 * fast this machine is. Packets per second are wall-clock.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_gro.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_net.h>

#include <jumbogate/engine.h>

#include "bench_stream.h"
#include "packet_builder.h"
#include "trace.h"

#define BURST		  32u
#define CHUNK		  512u
#define OUT_CAP		  (BURST * 4 + 1024)
#define DELAY_BIN_NS	  100u
#define DELAY_BINS	  20000u /* 2 ms */
#define HEADER_DATA_ROOM  256u
#define INPUT_DATA_ROOM	  2048u
#define GRO_TIMED_FLOWS	  1024u
#define GRO_TIMED_ITEMS	  8u
#define MAX_TIMER_CALLS	  1024u
#define ENGINE_HELD_LIMIT 65536u

enum path_kind { PATH_ENGINE, PATH_GRO, PATH_GRO_TIMED, PATH_PASS, PATHS };

static const char *const path_names[PATHS] = {"engine", "gro", "gro-timed",
					      "pass"};

struct options {
	struct trace_params trace;
	const char *pcap;
	const char *json;
	const char *label;
	uint32_t internal_mtu;
	uint32_t repeat;
	uint32_t max_delay_us;
	bool verify;
	bool software_checksums;
	bool paths[PATHS];
};

struct result {
	uint64_t packets_in, bytes_in, payload_in;
	uint64_t packets_out, bytes_out;
	uint64_t full_within_mtu; /* payload in packets 90..100% of MTU */
	uint64_t full_any_size;	  /* payload in packets >= 90% of MTU */
	uint64_t largest_ip_length;
	uint64_t delays, delay_sum_ns, delay_max_ns;
	uint64_t delays_before_arrival; /* accounting errors, must stay 0 */
	uint64_t delay_bins[DELAY_BINS + 1];
	uint64_t best_cycles;
	uint64_t static_memory, peak_held_mbufs, mbuf_bytes;
	uint64_t digest;
	uint64_t timer_calls;
	bool ran;
};

struct bench {
	struct options opt;
	struct trace trace;
	struct rte_mempool *input_pool, *header_pool;
	int arrival_offset; /* dynamic field: burst number + 1 */
	uint64_t *burst_time;
	uint64_t full_ip_length;
	uint64_t input_digest, input_payload;
	struct result results[PATHS];
};

/* ------------------------------------------------------------------ */
/* Paths                                                               */

struct path {
	enum path_kind kind;
	struct bench *bench;
	struct jg_engine *engine;
	void *gro_ctx;
	struct rte_gro_param gro_param;
	uint64_t next_flush_ns;
	uint64_t flush_period_ns;
};

static void parse_for_dpdk(struct rte_mbuf **pkts, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		struct rte_net_hdr_lens lens;

		pkts[i]->packet_type =
			rte_net_get_ptype(pkts[i], &lens, RTE_PTYPE_ALL_MASK);
		pkts[i]->l2_len = lens.l2_len;
		pkts[i]->l3_len = lens.l3_len;
		pkts[i]->l4_len = lens.l4_len;
	}
}

static bool path_start(struct path *p, struct bench *b, enum path_kind kind,
		       uint32_t run)
{
	char name[32];

	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->bench = b;
	if (kind == PATH_ENGINE) {
		struct jg_engine_config config;
		struct jg_stats stats;

		jg_engine_config_init(&config);
		snprintf(name, sizeof(name), "bench%u", run);
		config.name = name;
		config.header_pool = b->header_pool;
		config.internal_mtu = b->opt.internal_mtu;
		config.delay.max_delay_us = b->opt.max_delay_us;
		config.max_held_segments = ENGINE_HELD_LIMIT;
		config.checksum_mode = b->opt.software_checksums
					       ? JG_CHECKSUM_SOFTWARE
					       : JG_CHECKSUM_OFFLOAD;
		p->engine = jg_engine_create(&config);
		if (p->engine == NULL)
			return false;
		jg_engine_get_stats(p->engine, &stats);
		b->results[kind].static_memory = stats.memory_bytes;
	} else if (kind == PATH_GRO) {
		p->gro_param.gro_types = RTE_GRO_TCP_IPV4;
		p->gro_param.max_flow_num = BURST;
		p->gro_param.max_item_per_flow = BURST;
	} else if (kind == PATH_GRO_TIMED) {
		struct rte_malloc_socket_stats before, after;

		p->gro_param.gro_types = RTE_GRO_TCP_IPV4;
		p->gro_param.max_flow_num = GRO_TIMED_FLOWS;
		p->gro_param.max_item_per_flow = GRO_TIMED_ITEMS;
		p->gro_param.socket_id = 0;
		rte_malloc_get_socket_stats(0, &before);
		p->gro_ctx = rte_gro_ctx_create(&p->gro_param);
		rte_malloc_get_socket_stats(0, &after);
		if (p->gro_ctx == NULL)
			return false;
		b->results[kind].static_memory =
			after.heap_allocsz_bytes - before.heap_allocsz_bytes;
		p->flush_period_ns = b->opt.max_delay_us * 1000ull;
		p->next_flush_ns =
			b->trace.packets[0].time_ns + p->flush_period_ns;
	}
	return true;
}

static void path_stop(struct path *p)
{
	jg_engine_destroy(p->engine);
	if (p->gro_ctx != NULL)
		rte_gro_ctx_destroy(p->gro_ctx);
}

/* The path's work on one burst. Timed. */
static uint16_t path_burst(struct path *p, struct rte_mbuf **pkts, uint16_t n,
			   uint64_t now_ns, struct rte_mbuf **out)
{
	switch (p->kind) {
	case PATH_ENGINE:
		return jg_merge_burst(p->engine, pkts, n, now_ns, out, OUT_CAP);
	case PATH_GRO:
		parse_for_dpdk(pkts, n);
		n = rte_gro_reassemble_burst(pkts, n, &p->gro_param);
		memcpy(out, pkts, n * sizeof(*out));
		return n;
	case PATH_GRO_TIMED:
		parse_for_dpdk(pkts, n);
		n = rte_gro_reassemble(pkts, n, p->gro_ctx);
		memcpy(out, pkts, n * sizeof(*out));
		return n;
	case PATH_PASS:
	default:
		parse_for_dpdk(pkts, n);
		memcpy(out, pkts, n * sizeof(*out));
		return n;
	}
}

/* Timers due before `before_ns` (an idle poll at their deadline): writes
 * the outputs and their release time. Timed. */
static uint16_t path_timers(struct path *p, uint64_t before_ns,
			    struct rte_mbuf **out, uint64_t *when_ns)
{
	if (p->kind == PATH_ENGINE) {
		uint64_t deadline = jg_merge_next_deadline(p->engine);

		if (deadline >= before_ns)
			return 0;
		*when_ns = deadline;
		return jg_merge_timer(p->engine, deadline, out, OUT_CAP);
	}
	if (p->kind == PATH_GRO_TIMED && p->next_flush_ns < before_ns) {
		*when_ns = p->next_flush_ns;
		p->next_flush_ns += p->flush_period_ns;
		/* The table is empty after this flush, so the ticks before
		 * the next arrival flush nothing: skip them. Left behind (a
		 * gap in a capture longer than the timer calls between two
		 * bursts cover), a tick came after packets that arrived later
		 * than it, and their delay underflowed. */
		if (p->next_flush_ns < before_ns)
			p->next_flush_ns += (before_ns - p->next_flush_ns +
					     p->flush_period_ns - 1) /
					    p->flush_period_ns *
					    p->flush_period_ns;
		/* Timeout 0: everything in the table has waited a period. */
		return rte_gro_timeout_flush(p->gro_ctx, 0, RTE_GRO_TCP_IPV4,
					     out, OUT_CAP);
	}
	return 0;
}

static uint16_t path_finish(struct path *p, struct rte_mbuf **out)
{
	if (p->kind == PATH_ENGINE)
		return jg_merge_flush_all(p->engine, out, OUT_CAP);
	if (p->kind == PATH_GRO_TIMED)
		return rte_gro_timeout_flush(p->gro_ctx, 0, RTE_GRO_TCP_IPV4,
					     out, OUT_CAP);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Accounting (never timed)                                            */

static uint32_t *arrival_of(const struct bench *b, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, b->arrival_offset, uint32_t *);
}

static void record_delay(struct result *r, uint64_t arrival_ns,
			 uint64_t left_ns)
{
	/* A packet that left before it arrived is an accounting error: say
	 * so (verify fails on it) rather than count 2^64 ns. */
	if (left_ns < arrival_ns) {
		r->delays_before_arrival++;
		left_ns = arrival_ns;
	}
	uint64_t delay_ns = left_ns - arrival_ns;

	uint64_t bin = delay_ns / DELAY_BIN_NS;

	r->delays++;
	r->delay_sum_ns += delay_ns;
	r->delay_max_ns = RTE_MAX(r->delay_max_ns, delay_ns);
	r->delay_bins[RTE_MIN(bin, (uint64_t)DELAY_BINS)]++;
}

static void account_output(struct bench *b, struct result *r,
			   struct rte_mbuf *m, uint64_t when_ns, bool verify)
{
	struct bench_headers h;

	r->packets_out++;
	r->bytes_out += m->pkt_len;
	if (bench_parse(m, &h) && h.is_tcp) {
		if (h.ip_length >= b->full_ip_length) {
			r->full_any_size += h.payload_length;
			if (h.ip_length <= b->opt.internal_mtu)
				r->full_within_mtu += h.payload_length;
		}
		r->largest_ip_length =
			RTE_MAX(r->largest_ip_length, h.ip_length);
	}
	/* Each input mbuf leaves exactly once as a direct mbuf of the
	 * input pool (the engine's copied headers and indirect references
	 * come from its own pool). */
	for (struct rte_mbuf *s = m; s != NULL; s = s->next) {
		uint32_t *arrival;

		if (s->pool != b->input_pool || !RTE_MBUF_DIRECT(s))
			continue;
		arrival = arrival_of(b, s);
		if (*arrival != 0) {
			record_delay(r, b->burst_time[*arrival - 1], when_ns);
			*arrival = 0;
		}
	}
	if (verify)
		r->digest += bench_digest_packet(m);
}

static void release_outputs(struct bench *b, struct result *r,
			    struct rte_mbuf **out, uint16_t n, uint64_t when_ns,
			    uint64_t *cycles)
{
	uint64_t start;

	for (uint16_t i = 0; i < n; i++)
		account_output(b, r, out[i], when_ns, b->opt.verify);
	start = rte_rdtsc();
	rte_pktmbuf_free_bulk(out, n);
	*cycles += rte_rdtsc() - start;
}

static uint64_t held_mbufs(const struct bench *b, uint32_t unfed)
{
	return rte_mempool_in_use_count(b->input_pool) +
	       rte_mempool_in_use_count(b->header_pool) - unfed;
}

/* Copy packets [first, first + n) of the trace into fresh mbufs. */
static bool build_chunk(struct bench *b, uint32_t first, uint32_t n,
			struct rte_mbuf **pkts)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct trace_packet *tp = &b->trace.packets[first + i];
		struct rte_mbuf *m = pb_from_bytes(b->input_pool,
						   b->trace.bytes + tp->offset,
						   tp->length, 0);

		if (m == NULL) {
			rte_pktmbuf_free_bulk(pkts, i);
			return false;
		}
		/* What a NIC with checksum offload reports. */
		m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD |
			       RTE_MBUF_F_RX_L4_CKSUM_GOOD;
		for (struct rte_mbuf *s = m; s != NULL; s = s->next)
			*arrival_of(b, s) = 0;
		*arrival_of(b, m) = (first + i) / BURST + 1;
		pkts[i] = m;
	}
	return true;
}

static bool run_path(struct bench *b, enum path_kind kind, uint32_t run)
{
	static struct rte_mbuf *chunk[CHUNK];
	static struct rte_mbuf *out[OUT_CAP];
	struct result *r = &b->results[kind];
	struct result fresh;
	struct path p;
	uint64_t cycles = 0, start, when;
	uint16_t n;

	if (!path_start(&p, b, kind, run)) {
		fprintf(stderr, "%s: cannot start: %s\n", path_names[kind],
			rte_strerror(rte_errno));
		return false;
	}
	memset(&fresh, 0, sizeof(fresh));
	fresh.static_memory = r->static_memory;
	for (uint32_t first = 0; first < b->trace.count; first += CHUNK) {
		uint32_t count = RTE_MIN(CHUNK, b->trace.count - first);

		if (!build_chunk(b, first, count, chunk)) {
			fprintf(stderr, "input pool exhausted\n");
			path_stop(&p);
			return false;
		}
		for (uint32_t i = 0; i < count; i += BURST) {
			uint16_t size = (uint16_t)RTE_MIN(BURST, count - i);
			uint64_t now = b->burst_time[(first + i) / BURST];

			for (uint32_t calls = 0; calls < MAX_TIMER_CALLS;
			     calls++) {
				start = rte_rdtsc();
				n = path_timers(&p, now, out, &when);
				cycles += rte_rdtsc() - start;
				if (n == 0)
					break;
				fresh.timer_calls++;
				release_outputs(b, &fresh, out, n, when,
						&cycles);
			}
			for (uint16_t k = 0; k < size; k++) {
				fresh.packets_in++;
				fresh.bytes_in += chunk[i + k]->pkt_len;
			}
			start = rte_rdtsc();
			n = path_burst(&p, chunk + i, size, now, out);
			cycles += rte_rdtsc() - start;
			release_outputs(b, &fresh, out, n, now, &cycles);
			if ((i / BURST) % 8 == 0)
				fresh.peak_held_mbufs = RTE_MAX(
					fresh.peak_held_mbufs,
					held_mbufs(b, count - i - size));
		}
	}
	/* End of trace: the remaining timers run at their deadlines, then
	 * whatever is left leaves at the last arrival plus the bound. */
	uint64_t end = b->trace.packets[b->trace.count - 1].time_ns +
		       b->opt.max_delay_us * 1000ull;

	while ((n = path_timers(&p, end, out, &when)) > 0)
		release_outputs(b, &fresh, out, n, when, &cycles);
	while ((n = path_finish(&p, out)) > 0)
		release_outputs(b, &fresh, out, n, end, &cycles);
	path_stop(&p);

	fresh.best_cycles = r->ran ? RTE_MIN(r->best_cycles, cycles) : cycles;
	fresh.mbuf_bytes = b->input_pool->elt_size;
	fresh.ran = true;
	*r = fresh;
	if (rte_mempool_in_use_count(b->input_pool) != 0 ||
	    rte_mempool_in_use_count(b->header_pool) != 0) {
		fprintf(stderr, "%s: mbufs leaked\n", path_names[kind]);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Report                                                              */

static double mpps(const struct result *r)
{
	return r->best_cycles == 0
		       ? 0.0
		       : (double)r->packets_in * (double)rte_get_tsc_hz() /
				 (double)r->best_cycles / 1e6;
}

static double delay_quantile_us(const struct result *r, double q)
{
	uint64_t target = (uint64_t)ceil(q * (double)r->delays), seen = 0;

	for (uint32_t i = 0; i <= DELAY_BINS; i++) {
		seen += r->delay_bins[i];
		if (seen >= target && target > 0)
			return i == DELAY_BINS ? (double)r->delay_max_ns / 1e3
					       : RTE_MIN((i + 1) * DELAY_BIN_NS,
							 r->delay_max_ns) /
							 1e3;
	}
	return 0.0;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole == 0 ? 0.0 : (double)part / (double)whole;
}

static double memory_mib(const struct result *r)
{
	return (double)(r->static_memory + r->peak_held_mbufs * r->mbuf_bytes) /
	       (1024.0 * 1024.0);
}

static void print_summary(const struct bench *b)
{
	const struct result *engine = &b->results[PATH_ENGINE];

	printf("\n%s: %u packets, %u flows, %.2f ms of traffic, internal MTU "
	       "%u\n",
	       b->opt.label, b->trace.count, b->trace.flows,
	       b->trace.packets[b->trace.count - 1].time_ns / 1e6,
	       b->opt.internal_mtu);
	printf("%-10s %9s %10s %8s %8s %10s %9s %9s %9s %9s\n", "path", "Mpps",
	       "engine/x", "yield", "yield*", "pkts out", "mean us", "p99 us",
	       "max us", "mem MiB");
	for (unsigned int k = 0; k < PATHS; k++) {
		const struct result *r = &b->results[k];

		if (!r->ran)
			continue;
		printf("%-10s %9.3f %10.2f %8.3f %8.3f %10" PRIu64
		       " %9.2f %9.2f %9.2f %9.1f\n",
		       path_names[k], mpps(r),
		       engine->ran && mpps(r) > 0 ? mpps(engine) / mpps(r)
						  : 0.0,
		       share(r->full_within_mtu, b->input_payload),
		       share(r->full_any_size, b->input_payload),
		       r->packets_out,
		       r->delays ? r->delay_sum_ns / 1e3 / r->delays : 0.0,
		       delay_quantile_us(r, 0.99), r->delay_max_ns / 1e3,
		       memory_mib(r));
	}
	printf("yield: share of TCP payload leaving in packets of 90..100%% "
	       "of the internal MTU; yield*: >= 90%% at any size\n");
}

static void write_json(const struct bench *b)
{
	FILE *f = fopen(b->opt.json, "a");

	if (f == NULL) {
		perror(b->opt.json);
		return;
	}
	fprintf(f,
		"{\"scenario\": \"%s\", \"packets\": %u, \"flows\": %u, "
		"\"internal_mtu\": %u, \"line_gbps\": %.1f, "
		"\"max_delay_us\": %u, \"checksums\": \"%s\", "
		"\"input_payload\": %" PRIu64 ", \"paths\": {",
		b->opt.label, b->trace.count, b->trace.flows,
		b->opt.internal_mtu, b->opt.trace.line_gbps,
		b->opt.max_delay_us,
		b->opt.software_checksums ? "software" : "offload",
		b->input_payload);
	bool first = true;

	for (unsigned int k = 0; k < PATHS; k++) {
		const struct result *r = &b->results[k];

		if (!r->ran)
			continue;
		fprintf(f,
			"%s\"%s\": {\"mpps\": %.4f, \"packets_in\": %" PRIu64
			", \"bytes_in\": %" PRIu64 ", \"packets_out\": %" PRIu64
			", \"bytes_out\": %" PRIu64
			", \"yield_within_mtu\": %.4f, \"yield_any_size\": "
			"%.4f, \"largest_ip_length\": %" PRIu64
			", \"delay_mean_us\": %.3f, \"delay_p99_us\": %.3f, "
			"\"delay_max_us\": %.3f, \"delays\": %" PRIu64
			", \"memory_mib\": %.2f, \"static_memory\": %" PRIu64
			", \"peak_held_mbufs\": %" PRIu64 "}",
			first ? "" : ", ", path_names[k], mpps(r),
			r->packets_in, r->bytes_in, r->packets_out,
			r->bytes_out,
			share(r->full_within_mtu, b->input_payload),
			share(r->full_any_size, b->input_payload),
			r->largest_ip_length,
			r->delays ? r->delay_sum_ns / 1e3 / r->delays : 0.0,
			delay_quantile_us(r, 0.99), r->delay_max_ns / 1e3,
			r->delays, memory_mib(r), r->static_memory,
			r->peak_held_mbufs);
		first = false;
	}
	fprintf(f, "}}\n");
	fclose(f);
}

/* The checks the smoke test relies on. */
static bool consistent(const struct bench *b)
{
	bool ok = true;

	for (unsigned int k = 0; k < PATHS; k++) {
		const struct result *r = &b->results[k];

		if (!r->ran)
			continue;
		if (r->packets_in != b->trace.count ||
		    r->bytes_in != b->trace.bytes_used) {
			fprintf(stderr, "%s: saw a different input\n",
				path_names[k]);
			ok = false;
		}
		if (r->delays != b->trace.count) {
			fprintf(stderr, "%s: %" PRIu64 " of %u inputs left\n",
				path_names[k], r->delays, b->trace.count);
			ok = false;
		}
		if (r->delays_before_arrival != 0) {
			fprintf(stderr,
				"%s: %" PRIu64 " inputs left before they "
				"arrived (delay accounting)\n",
				path_names[k], r->delays_before_arrival);
			ok = false;
		}
		if (b->opt.verify && r->digest != b->input_digest) {
			fprintf(stderr,
				"%s: output byte stream differs from input\n",
				path_names[k]);
			ok = false;
		}
	}
	return ok;
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

static void usage(const char *program)
{
	fprintf(stderr,
		"usage: %s [--label NAME] [--flows N] [--packets N] "
		"[--train N] [--concurrency N]\n"
		"  [--reorder SHARE] [--loss SHARE] [--ipv6 SHARE] "
		"[--mice N] [--gbps G] [--seed N]\n"
		"  [--pcap FILE] [--mtu N] [--max-delay-us N] [--repeat N]\n"
		"  [--paths engine,gro,gro-timed,pass] [--software-checksums]"
		" [--verify] [--json FILE]\n",
		program);
}

static bool select_paths(struct options *o, const char *list)
{
	char copy[128], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", list);
	memset(o->paths, 0, sizeof(o->paths));
	for (char *name = strtok_r(copy, ",", &save); name != NULL;
	     name = strtok_r(NULL, ",", &save)) {
		unsigned int k;

		for (k = 0; k < PATHS; k++)
			if (strcmp(name, path_names[k]) == 0)
				break;
		if (k == PATHS)
			return false;
		o->paths[k] = true;
	}
	return true;
}

static bool parse_options(int argc, char **argv, struct options *o)
{
	static const struct option long_options[] = {
		{"label", required_argument, NULL, 'l'},
		{"flows", required_argument, NULL, 'f'},
		{"packets", required_argument, NULL, 'n'},
		{"train", required_argument, NULL, 't'},
		{"concurrency", required_argument, NULL, 'c'},
		{"reorder", required_argument, NULL, 'r'},
		{"loss", required_argument, NULL, 'x'},
		{"ipv6", required_argument, NULL, '6'},
		{"mice", required_argument, NULL, 'm'},
		{"gbps", required_argument, NULL, 'g'},
		{"seed", required_argument, NULL, 's'},
		{"pcap", required_argument, NULL, 'p'},
		{"mtu", required_argument, NULL, 'u'},
		{"max-delay-us", required_argument, NULL, 'd'},
		{"repeat", required_argument, NULL, 'R'},
		{"paths", required_argument, NULL, 'P'},
		{"software-checksums", no_argument, NULL, 'S'},
		{"verify", no_argument, NULL, 'V'},
		{"json", required_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int c;

	trace_params_default(&o->trace);
	o->label = "custom";
	o->internal_mtu = JG_DEFAULT_INTERNAL_MTU;
	o->repeat = 3;
	o->max_delay_us = 64;
	for (unsigned int k = 0; k < PATHS; k++)
		o->paths[k] = true;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		switch (c) {
		case 'l':
			o->label = optarg;
			break;
		case 'f':
			o->trace.flows = (uint32_t)atol(optarg);
			break;
		case 'n':
			o->trace.packets = (uint32_t)atol(optarg);
			break;
		case 't':
			o->trace.train = (uint32_t)atol(optarg);
			break;
		case 'c':
			o->trace.concurrency = (uint32_t)atol(optarg);
			break;
		case 'r':
			o->trace.reorder = atof(optarg);
			break;
		case 'x':
			o->trace.loss = atof(optarg);
			break;
		case '6':
			o->trace.ipv6_share = atof(optarg);
			break;
		case 'm':
			o->trace.mice = (uint32_t)atol(optarg);
			break;
		case 'g':
			o->trace.line_gbps = atof(optarg);
			break;
		case 's':
			o->trace.seed = (uint64_t)atoll(optarg);
			break;
		case 'p':
			o->pcap = optarg;
			break;
		case 'u':
			o->internal_mtu = (uint32_t)atol(optarg);
			break;
		case 'd':
			o->max_delay_us = (uint32_t)atol(optarg);
			break;
		case 'R':
			o->repeat = (uint32_t)atol(optarg);
			break;
		case 'P':
			if (!select_paths(o, optarg))
				return false;
			break;
		case 'S':
			o->software_checksums = true;
			break;
		case 'V':
			o->verify = true;
			break;
		case 'j':
			o->json = optarg;
			break;
		default:
			return false;
		}
	}
	return optind == argc && o->repeat > 0 && o->trace.line_gbps > 0 &&
	       o->max_delay_us > 0 && o->max_delay_us <= 1000;
}

static bool prepare(struct bench *b)
{
	static const struct rte_mbuf_dynfield arrival_field = {
		.name = "jumbogate_bench_arrival",
		.size = sizeof(uint32_t),
		.align = __alignof__(uint32_t),
	};
	uint32_t bursts;

	if (b->opt.pcap != NULL ? !trace_load_pcap(&b->trace, b->opt.pcap, 0.0)
				: !trace_generate(&b->trace, &b->opt.trace)) {
		fprintf(stderr, "cannot build the trace\n");
		return false;
	}
	bursts = (b->trace.count + BURST - 1) / BURST;
	b->burst_time = calloc(bursts, sizeof(uint64_t));
	if (b->burst_time == NULL)
		return false;
	for (uint32_t i = 0; i < bursts; i++)
		b->burst_time[i] = b->trace.packets[RTE_MIN((i + 1) * BURST,
							    b->trace.count) -
						    1]
					   .time_ns;
	b->full_ip_length = (b->opt.internal_mtu * 9 + 9) / 10;
	for (uint32_t i = 0; i < b->trace.count; i++) {
		const struct trace_packet *tp = &b->trace.packets[i];

		b->input_payload += bench_tcp_payload(
			b->trace.bytes + tp->offset, tp->length);
		if (b->opt.verify)
			b->input_digest += bench_digest_frame(
				b->trace.bytes + tp->offset, tp->length);
	}
	b->arrival_offset = rte_mbuf_dynfield_register(&arrival_field);
	b->input_pool = rte_pktmbuf_pool_create(
		"bench_input", CHUNK + ENGINE_HELD_LIMIT + 16384, 256, 0,
		INPUT_DATA_ROOM + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	b->header_pool = rte_pktmbuf_pool_create(
		"bench_headers", 2 * ENGINE_HELD_LIMIT + 16384, 256, 0,
		HEADER_DATA_ROOM + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	if (b->arrival_offset < 0 || b->input_pool == NULL ||
	    b->header_pool == NULL) {
		fprintf(stderr, "cannot create pools: %s\n",
			rte_strerror(rte_errno));
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	static struct bench b;
	char *eal_argv[] = {
		argv[0],
		"--no-huge",
		"--no-pci",
		"-l",
		"0",
		"-m",
		"1536",
		"--no-telemetry",
		"--log-level",
		"*:error",
		"--file-prefix=jumbogate-bench",
		"--no-shconf",
	};
	bool ok = true;

	if (!parse_options(argc, argv, &b.opt)) {
		usage(argv[0]);
		return 2;
	}
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0) {
		fprintf(stderr, "cannot initialise DPDK EAL\n");
		return 1;
	}
	if (!prepare(&b)) {
		rte_eal_cleanup();
		return 1;
	}
	/* Interleave the paths and keep each one's fastest pass, so a
	 * neighbour's burst of CPU use hurts none of them selectively. */
	for (uint32_t run = 0; run < b.opt.repeat && ok; run++)
		for (unsigned int k = 0; k < PATHS && ok; k++)
			if (b.opt.paths[k])
				ok = run_path(&b, (enum path_kind)k, run);
	if (ok) {
		print_summary(&b);
		ok = consistent(&b);
		if (b.opt.json != NULL)
			write_json(&b);
	}
	trace_free(&b.trace);
	free(b.burst_time);
	rte_mempool_free(b.input_pool);
	rte_mempool_free(b.header_pool);
	rte_eal_cleanup();
	return ok ? 0 : 1;
}
