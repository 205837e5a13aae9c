/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What jumbogate-bench's parts share: the paths, the options, and each
 * path's results per feed (bench.c runs the paths, bench_report.c prints
 * and checks what they measured).
 */
#ifndef JUMBOGATE_BENCH_H
#define JUMBOGATE_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

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
#define MAX_WORKERS	  4u
/* The longest the engine can hold a run (max_delay_us is at most 10000,
 * engine.h): the ceiling path's wait. */
#define CEILING_DELAY_US 10000u

enum path_kind {
	PATH_ENGINE,
	PATH_GRO,
	PATH_GRO_TIMED,
	PATH_PASS,
	PATH_CEILING,
	PATHS
};

static const char *const path_names[PATHS] = {"engine", "gro", "gro-timed",
					      "pass", "ceiling"};

struct options {
	struct trace_params trace;
	const char *pcap;
	const char *json;
	const char *label;
	uint32_t internal_mtu;
	uint32_t repeat;
	uint32_t max_delay_us;
	uint32_t workers;
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
	uint64_t best_cycles, last_cycles;
	uint64_t static_memory, peak_held_mbufs, mbuf_bytes;
	uint32_t flow_state_bytes; /* the engine's memory per flow; 0 else */
	uint64_t digest;
	uint64_t timer_calls;
	bool ran;
};

struct bench;

/* What one core is fed: the trace's packets it takes (all of them, or the
 * flows RSS gives one worker) in bursts of its own, its own pools (no
 * mbuf or engine state is shared between workers), and its results. */
struct feed {
	struct bench *bench;
	unsigned int id;
	uint32_t *order; /* trace indices, in arrival order */
	uint32_t count;
	uint64_t *burst_time; /* arrival of each burst's last packet */
	struct rte_mempool *input_pool, *header_pool;
	struct rte_mbuf *chunk[CHUNK];
	struct rte_mbuf *out[OUT_CAP];
	uint32_t run;	     /* the pass a worker is asked to make, */
	enum path_kind kind; /* on this path */
	struct result results[PATHS];
};

struct bench {
	struct options opt;
	struct trace trace;
	int arrival_offset; /* dynamic field: burst number + 1 */
	uint64_t full_ip_length;
	uint64_t input_digest, input_payload;
	struct feed *all;
	struct feed *workers[MAX_WORKERS];
	/* The engine, and the pass-through as the cores' own scaling, on
	 * every worker at once. */
	struct result workers_total[PATHS];
};

/* The delay bound a path's engine runs with. */
static inline uint32_t path_max_delay_us(const struct bench *b,
					 enum path_kind kind)
{
	return kind == PATH_CEILING ? CEILING_DELAY_US : b->opt.max_delay_us;
}

/* bench_options.c: fill o from the command line (false: a mistake, said
 * on stderr); print the usage. */
bool bench_parse_options(int argc, char **argv, struct options *o);
void bench_usage(const char *program);

/* The results on stdout: one table of every path that ran. */
void bench_print_summary(const struct bench *b);
/* The results as JSON in the file --json names. */
void bench_write_json(const struct bench *b);
/* The checks the smoke test relies on: every path saw the same input,
 * delivered its byte stream whole and leaked nothing. */
bool bench_consistent(const struct bench *b);

#endif /* JUMBOGATE_BENCH_H */
