/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-bench: one in-memory trace, fed on one core through
 *   engine      jumbogate's merge (jg_merge_burst + jg_merge_timer),
 *   gro         DPDK rte_gro_reassemble_burst (lightweight, per burst),
 *   gro-timed   DPDK rte_gro_reassemble + rte_gro_timeout_flush
 *               (heavyweight, flushed at the engine's delay bound),
 *   pass        parse each packet's headers and return it untouched: the
 *               per-core limit of packet handling on this machine,
 *   ceiling     the engine again, every incomplete run waiting as long as
 *               the engine can hold it (10 ms): the yield that waiting
 *               without bound reaches under the same merge rules, which
 *               the default delay model is measured against (run once;
 *               its speed means nothing).
 *
 * With --workers N the engine also runs on N cores at once, the trace's
 * flows split between them as RSS would split them (by a hash of the
 * addresses and ports), each worker with its own engine and pools: the
 * aggregate packets per second against one worker's.
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

#include "bench.h"
#include "bench_stream.h"
#include "packet_builder.h"
#include "trace.h"

/* ------------------------------------------------------------------ */
/* Paths                                                               */

struct path {
	enum path_kind kind;
	struct bench *bench;
	struct feed *feed;
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

static bool path_start(struct path *p, struct feed *feed, enum path_kind kind,
		       uint32_t run)
{
	struct bench *b = feed->bench;
	char name[32];

	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->bench = b;
	p->feed = feed;
	if (kind == PATH_ENGINE || kind == PATH_CEILING) {
		struct jg_engine_config config;
		struct jg_stats stats;

		jg_engine_config_init(&config);
		snprintf(name, sizeof(name), "bench%u-%u-%u", feed->id, kind,
			 run);
		config.name = name;
		config.header_pool = feed->header_pool;
		config.internal_mtu = b->opt.internal_mtu;
		config.delay.max_delay_us = path_max_delay_us(b, kind);
		config.delay.wait_always = kind == PATH_CEILING;
		config.max_held_segments = ENGINE_HELD_LIMIT;
		config.checksum_mode = b->opt.software_checksums
					       ? JG_CHECKSUM_SOFTWARE
					       : JG_CHECKSUM_OFFLOAD;
		p->engine = jg_engine_create(&config);
		if (p->engine == NULL)
			return false;
		jg_engine_get_stats(p->engine, &stats);
		feed->results[kind].static_memory = stats.memory_bytes;
		feed->results[kind].flow_state_bytes = stats.flow_state_bytes;
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
		feed->results[kind].static_memory =
			after.heap_allocsz_bytes - before.heap_allocsz_bytes;
		p->flush_period_ns = b->opt.max_delay_us * 1000ull;
		p->next_flush_ns = b->trace.packets[feed->order[0]].time_ns +
				   p->flush_period_ns;
	}
	return true;
}

static void path_stop(struct path *p)
{
	if (p->kind == PATH_CEILING) {
		struct jg_stats stats;

		/* Runs held 10 ms can reach the held-segment budget at high
		 * offered loads; segments past it pass unmerged, and the
		 * ceiling would be lower than waiting can reach. */
		jg_engine_get_stats(p->engine, &stats);
		if (stats.merge.held_full_passes > 0)
			fprintf(stderr,
				"ceiling: %" PRIu64 " segments passed unmerged "
				"at the held-segment budget (%u): the ceiling "
				"is understated\n",
				stats.merge.held_full_passes,
				ENGINE_HELD_LIMIT);
	}
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
	case PATH_CEILING:
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
	if (p->engine != NULL) {
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
	if (p->engine != NULL)
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

static void account_output(struct feed *feed, struct result *r,
			   struct rte_mbuf *m, uint64_t when_ns, bool verify)
{
	struct bench *b = feed->bench;
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

		if (s->pool != feed->input_pool || !RTE_MBUF_DIRECT(s))
			continue;
		arrival = arrival_of(b, s);
		if (*arrival != 0) {
			record_delay(r, feed->burst_time[*arrival - 1],
				     when_ns);
			*arrival = 0;
		}
	}
	if (verify)
		r->digest += bench_digest_packet(m);
}

static void release_outputs(struct feed *feed, struct result *r,
			    struct rte_mbuf **out, uint16_t n, uint64_t when_ns,
			    uint64_t *cycles)
{
	uint64_t start;

	for (uint16_t i = 0; i < n; i++)
		account_output(feed, r, out[i], when_ns,
			       feed->bench->opt.verify);
	start = rte_rdtsc();
	rte_pktmbuf_free_bulk(out, n);
	*cycles += rte_rdtsc() - start;
}

static uint64_t held_mbufs(const struct feed *feed, uint32_t unfed)
{
	return rte_mempool_in_use_count(feed->input_pool) +
	       rte_mempool_in_use_count(feed->header_pool) - unfed;
}

/* Copy the feed's packets [first, first + n) into fresh mbufs. */
static bool build_chunk(struct feed *feed, uint32_t first, uint32_t n,
			struct rte_mbuf **pkts)
{
	struct bench *b = feed->bench;

	for (uint32_t i = 0; i < n; i++) {
		const struct trace_packet *tp =
			&b->trace.packets[feed->order[first + i]];
		struct rte_mbuf *m = pb_from_bytes(feed->input_pool,
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

static bool run_path(struct feed *feed, enum path_kind kind, uint32_t run)
{
	struct bench *b = feed->bench;
	struct rte_mbuf **chunk = feed->chunk, **out = feed->out;
	struct result *r = &feed->results[kind];
	struct result fresh;
	struct path p;
	uint64_t cycles = 0, start, when;
	uint16_t n;

	if (!path_start(&p, feed, kind, run)) {
		fprintf(stderr, "%s: cannot start: %s\n", path_names[kind],
			rte_strerror(rte_errno));
		return false;
	}
	memset(&fresh, 0, sizeof(fresh));
	fresh.static_memory = r->static_memory;
	fresh.flow_state_bytes = r->flow_state_bytes;
	for (uint32_t first = 0; first < feed->count; first += CHUNK) {
		uint32_t count = RTE_MIN(CHUNK, feed->count - first);

		if (!build_chunk(feed, first, count, chunk)) {
			fprintf(stderr, "input pool exhausted\n");
			path_stop(&p);
			return false;
		}
		for (uint32_t i = 0; i < count; i += BURST) {
			uint16_t size = (uint16_t)RTE_MIN(BURST, count - i);
			uint64_t now = feed->burst_time[(first + i) / BURST];

			for (uint32_t calls = 0; calls < MAX_TIMER_CALLS;
			     calls++) {
				start = rte_rdtsc();
				n = path_timers(&p, now, out, &when);
				cycles += rte_rdtsc() - start;
				if (n == 0)
					break;
				fresh.timer_calls++;
				release_outputs(feed, &fresh, out, n, when,
						&cycles);
			}
			for (uint16_t k = 0; k < size; k++) {
				fresh.packets_in++;
				fresh.bytes_in += chunk[i + k]->pkt_len;
			}
			start = rte_rdtsc();
			n = path_burst(&p, chunk + i, size, now, out);
			cycles += rte_rdtsc() - start;
			release_outputs(feed, &fresh, out, n, now, &cycles);
			if ((i / BURST) % 8 == 0)
				fresh.peak_held_mbufs = RTE_MAX(
					fresh.peak_held_mbufs,
					held_mbufs(feed, count - i - size));
		}
	}
	/* End of trace: the remaining timers run at their deadlines, then
	 * whatever is left leaves at the last arrival plus the bound. */
	uint64_t end = b->trace.packets[feed->order[feed->count - 1]].time_ns +
		       path_max_delay_us(b, kind) * 1000ull;

	while ((n = path_timers(&p, end, out, &when)) > 0)
		release_outputs(feed, &fresh, out, n, when, &cycles);
	while ((n = path_finish(&p, out)) > 0)
		release_outputs(feed, &fresh, out, n, end, &cycles);
	path_stop(&p);

	fresh.best_cycles = r->ran ? RTE_MIN(r->best_cycles, cycles) : cycles;
	fresh.last_cycles = cycles;
	fresh.mbuf_bytes = feed->input_pool->elt_size;
	fresh.ran = true;
	*r = fresh;
	if (rte_mempool_in_use_count(feed->input_pool) != 0 ||
	    rte_mempool_in_use_count(feed->header_pool) != 0) {
		fprintf(stderr, "%s: mbufs leaked\n", path_names[kind]);
		return false;
	}
	return true;
}

static int worker_main(void *arg)
{
	struct feed *feed = arg;

	return run_path(feed, feed->kind, feed->run) ? 0 : -1;
}

/* One pass of a path on every worker at once: worker 0 on this core, the
 * others on theirs. The pass takes as long as its slowest worker. */
static bool run_workers(struct bench *b, enum path_kind kind, uint32_t run)
{
	unsigned int lcore = rte_get_next_lcore(-1, 1, 0);
	unsigned int lcores[MAX_WORKERS];
	uint64_t slowest = 0;
	bool ok = true;

	for (uint32_t w = 0; w < b->opt.workers; w++) {
		b->workers[w]->run = run;
		b->workers[w]->kind = kind;
	}
	uint32_t launched = 1;

	for (; launched < b->opt.workers; launched++) {
		lcores[launched] = lcore;
		if (rte_eal_remote_launch(worker_main, b->workers[launched],
					  lcore) != 0)
			break;
		lcore = rte_get_next_lcore(lcore, 1, 0);
	}
	/* Worker 0 runs only when all could start; those that did are
	 * waited for either way, before anything they use is freed. */
	ok = launched == b->opt.workers && worker_main(b->workers[0]) == 0;
	for (uint32_t w = 1; w < launched; w++)
		if (rte_eal_wait_lcore(lcores[w]) != 0)
			ok = false;
	if (!ok)
		return false;

	struct result *total = &b->workers_total[kind];
	uint64_t best = total->best_cycles;
	bool ran = total->ran;

	memset(total, 0, sizeof(*total));
	for (uint32_t w = 0; w < b->opt.workers; w++) {
		const struct result *r = &b->workers[w]->results[kind];

		slowest = RTE_MAX(slowest, r->last_cycles);
		total->packets_in += r->packets_in;
		total->bytes_in += r->bytes_in;
		total->payload_in += r->payload_in;
		total->packets_out += r->packets_out;
		total->bytes_out += r->bytes_out;
		total->full_within_mtu += r->full_within_mtu;
		total->full_any_size += r->full_any_size;
		total->largest_ip_length =
			RTE_MAX(total->largest_ip_length, r->largest_ip_length);
		total->delays += r->delays;
		total->delay_sum_ns += r->delay_sum_ns;
		total->delay_max_ns =
			RTE_MAX(total->delay_max_ns, r->delay_max_ns);
		total->delays_before_arrival += r->delays_before_arrival;
		for (uint32_t i = 0; i <= DELAY_BINS; i++)
			total->delay_bins[i] += r->delay_bins[i];
		total->static_memory += r->static_memory;
		total->peak_held_mbufs += r->peak_held_mbufs;
		total->mbuf_bytes = r->mbuf_bytes;
		total->flow_state_bytes = r->flow_state_bytes;
		total->digest += r->digest;
		total->timer_calls += r->timer_calls;
	}
	total->best_cycles = ran ? RTE_MIN(best, slowest) : slowest;
	total->last_cycles = slowest;
	total->ran = true;
	return true;
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

/* A feed of the trace's packets `order[0..count)` (taken over), with its
 * bursts' times and pools of its own. */
static struct feed *feed_create(struct bench *b, unsigned int id,
				uint32_t *order, uint32_t count)
{
	struct feed *feed = calloc(1, sizeof(*feed));
	uint32_t bursts = (count + BURST - 1) / BURST;
	char name[32];

	if (feed == NULL) {
		free(order);
		return NULL;
	}
	feed->bench = b;
	feed->id = id;
	feed->order = order;
	feed->count = count;
	feed->burst_time = calloc(RTE_MAX(bursts, 1u), sizeof(uint64_t));
	if (order == NULL || feed->burst_time == NULL)
		return feed;
	for (uint32_t i = 0; i < bursts; i++)
		feed->burst_time[i] =
			b->trace.packets[order[RTE_MIN((i + 1) * BURST, count) -
					       1]]
				.time_ns;
	snprintf(name, sizeof(name), "bench_input%u", id);
	feed->input_pool = rte_pktmbuf_pool_create(
		name, CHUNK + ENGINE_HELD_LIMIT + 16384, 256, 0,
		INPUT_DATA_ROOM + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	snprintf(name, sizeof(name), "bench_headers%u", id);
	feed->header_pool = rte_pktmbuf_pool_create(
		name, 2 * ENGINE_HELD_LIMIT + 16384, 256, 0,
		HEADER_DATA_ROOM + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	return feed;
}

static bool feed_ready(const struct feed *feed)
{
	return feed != NULL && feed->order != NULL &&
	       feed->burst_time != NULL && feed->input_pool != NULL &&
	       feed->header_pool != NULL;
}

static void feed_free(struct feed *feed)
{
	if (feed == NULL)
		return;
	free(feed->order);
	free(feed->burst_time);
	rte_mempool_free(feed->input_pool);
	rte_mempool_free(feed->header_pool);
	free(feed);
}

/* The worker RSS would give a frame: a hash of its addresses and ports
 * (frames that are not IP go to the first). */
static uint32_t rss_worker(const struct bench *b, const struct trace_packet *tp)
{
	struct bench_headers h;

	uint64_t x;

	if (!bench_parse_frame(b->trace.bytes + tp->offset, tp->length, &h))
		return 0;
	/* The flow key's bits are not uniform enough on their own (the
	 * generated flows differ in few address bits): mix them as a NIC's
	 * Toeplitz hash would spread them (MurmurHash3's finaliser). */
	x = h.flow_key;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)(x % b->opt.workers);
}

static bool split_for_workers(struct bench *b)
{
	uint32_t *orders[MAX_WORKERS], counts[MAX_WORKERS] = {0};
	bool ok = true;

	for (uint32_t w = 0; w < b->opt.workers; w++)
		orders[w] =
			malloc(RTE_MAX(b->trace.count, 1u) * sizeof(uint32_t));
	for (uint32_t i = 0; i < b->trace.count; i++) {
		uint32_t w = rss_worker(b, &b->trace.packets[i]);

		if (orders[w] != NULL)
			orders[w][counts[w]++] = i;
	}
	for (uint32_t w = 0; w < b->opt.workers; w++) {
		if (counts[w] == 0) {
			fprintf(stderr,
				"worker %u gets no packet: too few "
				"flows for %u workers\n",
				w, b->opt.workers);
			ok = false;
		}
		b->workers[w] = feed_create(b, w + 1, orders[w], counts[w]);
		ok = ok && feed_ready(b->workers[w]);
	}
	return ok;
}

static bool prepare(struct bench *b)
{
	static const struct rte_mbuf_dynfield arrival_field = {
		.name = "jumbogate_bench_arrival",
		.size = sizeof(uint32_t),
		.align = __alignof__(uint32_t),
	};
	uint32_t *order;

	if (b->opt.pcap != NULL ? !trace_load_pcap(&b->trace, b->opt.pcap, 0.0)
				: !trace_generate(&b->trace, &b->opt.trace)) {
		fprintf(stderr, "cannot build the trace\n");
		return false;
	}
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
	order = malloc(RTE_MAX(b->trace.count, 1u) * sizeof(uint32_t));
	for (uint32_t i = 0; order != NULL && i < b->trace.count; i++)
		order[i] = i;
	b->all = feed_create(b, 0, order, b->trace.count);
	if (b->arrival_offset < 0 || !feed_ready(b->all) ||
	    (b->opt.workers > 1 && !split_for_workers(b))) {
		fprintf(stderr, "cannot create pools: %s\n",
			rte_strerror(rte_errno));
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	static struct bench b;
	char lcores[16], memory[16];
	char *eal_argv[] = {
		argv[0],
		"--no-huge",
		"--no-pci",
		"-l",
		lcores,
		"-m",
		memory,
		"--no-telemetry",
		"--log-level",
		"*:error",
		"--file-prefix=jumbogate-bench",
		"--no-shconf",
	};
	bool ok = true;

	if (!bench_parse_options(argc, argv, &b.opt)) {
		bench_usage(argv[0]);
		return 2;
	}
	/* One core per worker; pools of their own for each worker. */
	snprintf(lcores, sizeof(lcores), "0-%u", b.opt.workers - 1);
	snprintf(memory, sizeof(memory), "%u",
		 1536 + (b.opt.workers > 1 ? 512 * b.opt.workers : 0));
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0) {
		fprintf(stderr,
			"cannot initialise DPDK EAL (--workers %u "
			"needs %u cores)\n",
			b.opt.workers, b.opt.workers);
		return 1;
	}
	if (!prepare(&b)) {
		rte_eal_cleanup();
		return 1;
	}
	/* Interleave the paths and keep each one's fastest pass, so a
	 * neighbour's burst of CPU use hurts none of them selectively. */
	for (uint32_t run = 0; run < b.opt.repeat && ok; run++) {
		for (unsigned int k = 0; k < PATHS && ok; k++)
			/* The ceiling's speed means nothing: one pass. */
			if (b.opt.paths[k] && (k != PATH_CEILING || run == 0))
				ok = run_path(b.all, (enum path_kind)k, run);
		/* The pass-through on the same workers shows what the
		 * cores themselves give a second worker. */
		if (ok && b.opt.workers > 1)
			ok = run_workers(&b, PATH_ENGINE, run) &&
			     run_workers(&b, PATH_PASS, run);
	}
	if (ok) {
		bench_print_summary(&b);
		ok = bench_consistent(&b);
		if (b.opt.json != NULL)
			bench_write_json(&b);
	}
	trace_free(&b.trace);
	feed_free(b.all);
	for (uint32_t w = 0; w < MAX_WORKERS; w++)
		feed_free(b.workers[w]);
	rte_eal_cleanup();
	return ok ? 0 : 1;
}
