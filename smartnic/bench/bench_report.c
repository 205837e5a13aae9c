/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-bench's report: the summary table, the JSON file, and the
 * consistency checks of what every path measured.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include <rte_cycles.h>

#include "bench.h"

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

static double mean_delay_us(const struct result *r)
{
	return r->delays ? r->delay_sum_ns / 1e3 / r->delays : 0.0;
}

void bench_print_summary(const struct bench *b)
{
	const struct result *results = b->all->results;
	const struct result *engine = &results[PATH_ENGINE];
	const struct result *ceiling = &results[PATH_CEILING];

	printf("\n%s: %u packets, %u flows, %.2f ms of traffic, internal MTU "
	       "%u\n",
	       b->opt.label, b->trace.count, b->trace.flows,
	       b->trace.packets[b->trace.count - 1].time_ns / 1e6,
	       b->opt.internal_mtu);
	printf("%-10s %9s %10s %8s %8s %10s %9s %9s %9s %9s\n", "path", "Mpps",
	       "engine/x", "yield", "yield*", "pkts out", "mean us", "p99 us",
	       "max us", "mem MiB");
	for (unsigned int k = 0; k < PATHS; k++) {
		const struct result *r = &results[k];

		if (!r->ran)
			continue;
		printf("%-10s %9.3f %10.2f %8.3f %8.3f %10" PRIu64
		       " %9.2f %9.2f %9.2f %9.1f\n",
		       path_names[k], mpps(r),
		       engine->ran && mpps(r) > 0 ? mpps(engine) / mpps(r)
						  : 0.0,
		       share(r->full_within_mtu, b->input_payload),
		       share(r->full_any_size, b->input_payload),
		       r->packets_out, mean_delay_us(r),
		       delay_quantile_us(r, 0.99), r->delay_max_ns / 1e3,
		       memory_mib(r));
	}
	printf("yield: share of TCP payload leaving in packets of 90..100%% "
	       "of the internal MTU; yield*: >= 90%% at any size\n");
	if (engine->ran && ceiling->ran)
		printf("yield ceiling (every run waits up to %u us): %.1f%%; "
		       "the engine's delay model: %.1f%%, %.1f points "
		       "below\n",
		       CEILING_DELAY_US,
		       100 * share(ceiling->full_within_mtu, b->input_payload),
		       100 * share(engine->full_within_mtu, b->input_payload),
		       100 * (share(ceiling->full_within_mtu,
				    b->input_payload) -
			      share(engine->full_within_mtu,
				    b->input_payload)));
	if (engine->ran)
		printf("per-flow state: %u bytes (flow entry, full key, bucket "
		       "signature)\n",
		       engine->flow_state_bytes);
	if (b->opt.workers > 1) {
		printf("%u workers, flows split as RSS would (packets:",
		       b->opt.workers);
		for (uint32_t i = 0; i < b->opt.workers; i++)
			printf(" %u", b->workers[i]->count);
		printf(")\n");
	}
	for (unsigned int k = 0; k < PATHS; k++) {
		const struct result *w = &b->workers_total[k];

		if (!w->ran)
			continue;
		printf("  %-8s %.3f Mpps together, %.2fx one worker; "
		       "yield %.3f, mean delay %.2f us\n",
		       path_names[k], mpps(w),
		       mpps(&results[k]) > 0 ? mpps(w) / mpps(&results[k])
					     : 0.0,
		       share(w->full_within_mtu, b->input_payload),
		       mean_delay_us(w));
	}
}

void bench_write_json(const struct bench *b)
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
		const struct result *r = &b->all->results[k];

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
			", \"peak_held_mbufs\": %" PRIu64
			", \"flow_state_bytes\": %u"
			", \"max_delay_bound_us\": %u}",
			first ? "" : ", ", path_names[k], mpps(r),
			r->packets_in, r->bytes_in, r->packets_out,
			r->bytes_out,
			share(r->full_within_mtu, b->input_payload),
			share(r->full_any_size, b->input_payload),
			r->largest_ip_length, mean_delay_us(r),
			delay_quantile_us(r, 0.99), r->delay_max_ns / 1e3,
			r->delays, memory_mib(r), r->static_memory,
			r->peak_held_mbufs, r->flow_state_bytes,
			path_max_delay_us(b, (enum path_kind)k));
		first = false;
	}
	fprintf(f, "}");
	if (b->opt.workers > 1) {
		fprintf(f, ", \"workers\": {\"count\": %u, \"packets\": [",
			b->opt.workers);
		for (uint32_t i = 0; i < b->opt.workers; i++)
			fprintf(f, "%s%u", i ? ", " : "", b->workers[i]->count);
		fprintf(f, "]");
		for (unsigned int k = 0; k < PATHS; k++) {
			const struct result *w = &b->workers_total[k];

			if (!w->ran)
				continue;
			fprintf(f,
				", \"%s\": {\"mpps\": %.4f, \"packets_out\": "
				"%" PRIu64 ", \"yield_within_mtu\": %.4f, "
				"\"delay_mean_us\": %.3f, \"delay_max_us\": "
				"%.3f}",
				path_names[k], mpps(w), w->packets_out,
				share(w->full_within_mtu, b->input_payload),
				mean_delay_us(w), w->delay_max_ns / 1e3);
		}
		fprintf(f, "}");
	}
	fprintf(f, "}\n");
	fclose(f);
}

/* What every path's result must show: it saw the whole input, every input
 * left once and not before it arrived, and (verified) the output carries
 * exactly the input's byte stream. */
static bool result_consistent(const struct bench *b, const char *name,
			      const struct result *r)
{
	bool ok = true;

	if (r->packets_in != b->trace.count ||
	    r->bytes_in != b->trace.bytes_used) {
		fprintf(stderr, "%s: saw a different input\n", name);
		ok = false;
	}
	if (r->delays != b->trace.count) {
		fprintf(stderr, "%s: %" PRIu64 " of %u inputs left\n", name,
			r->delays, b->trace.count);
		ok = false;
	}
	if (r->delays_before_arrival != 0) {
		fprintf(stderr,
			"%s: %" PRIu64 " inputs left before they "
			"arrived (delay accounting)\n",
			name, r->delays_before_arrival);
		ok = false;
	}
	if (b->opt.verify && r->digest != b->input_digest) {
		fprintf(stderr, "%s: output byte stream differs from input\n",
			name);
		ok = false;
	}
	return ok;
}

bool bench_consistent(const struct bench *b)
{
	const struct result *results = b->all->results;
	bool ok = true;

	for (unsigned int k = 0; k < PATHS; k++)
		if (results[k].ran &&
		    !result_consistent(b, path_names[k], &results[k]))
			ok = false;
	for (unsigned int k = 0; k < PATHS; k++)
		if (b->workers_total[k].ran &&
		    !result_consistent(b, "workers", &b->workers_total[k]))
			ok = false;
	return ok;
}
