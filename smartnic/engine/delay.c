/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How long an incomplete run may wait for the segments that would fill it.
 *
 * Waiting costs latency for every byte already held; not waiting sends a
 * short packet. For a flow that keeps sending, arrivals look like a Poisson
 * process with the flow's mean inter-arrival time s, so the time for the k
 * missing segments to arrive is Gamma(k, s). Waiting up to its 0.95
 * quantile (the Estimated Time of Merge) completes the run with 95%
 * probability and never waits for traffic that is not coming. Slow flows
 * would wait too long for little gain, and flows that already merge well
 * within bursts gain nothing, so neither waits at all.
 *
 * The engine sees a segment only when a poll hands it over, up to one
 * poll interval after it arrived, and stamps it with that poll's time. A
 * run's first segment arrived no later than its stamp, so if the missing
 * segments arrive within the ETM of it, the last one is handed over by
 * stamp + ETM + one interval. The wait therefore adds the smoothed gap
 * between a burst and the poll before it (empty polls count when the
 * caller notes them with jg_merge_note_poll) to the ETM; without it,
 * segments that arrived in time but were handed over after the deadline
 * end runs short (at 800 interleaved flows at 25 Gbps, bursts of 32 come
 * every 16 us, a third of a typical ETM, and one run in 25 left short of
 * full).
 *
 * Deadlines sit in a timer wheel of 16384 slots of 1.024 us; within the
 * current slot the exact deadline is compared, so a flow is released by
 * the first timer pass at or after its deadline, never before.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* P(Gamma(k, 1) <= x) for integer k: 1 - e^-x * sum_{n<k} x^n / n!. */
static double erlang_cdf(unsigned int k, double x)
{
	double term = 1.0, sum = 1.0;

	for (unsigned int n = 1; n < k; n++) {
		term *= x / n;
		sum += term;
	}
	return 1.0 - exp(-x) * sum;
}

static double erlang_quantile(unsigned int k, double probability)
{
	double low = 0.0, high = k + 20.0 * sqrt((double)k) + 50.0;

	for (int i = 0; i < 100; i++) {
		double middle = (low + high) / 2;

		if (erlang_cdf(k, middle) < probability)
			low = middle;
		else
			high = middle;
	}
	return (low + high) / 2;
}

void jg_delay_model_init(struct jg_engine *e)
{
	const struct jg_delay_model *model = &e->config.delay;

	e->etm_quantile[0] = 0.0f;
	for (unsigned int k = 1; k <= JG_ETM_MAX_SHAPE; k++)
		e->etm_quantile[k] = (float)erlang_quantile(k, model->quantile);
	/* 1 Gbps is 125,000 bytes per millisecond. */
	e->rate_threshold_bytes_per_ms =
		(uint32_t)(model->rate_threshold_gbps * 125000.0);
	e->yield_threshold_permille =
		(uint16_t)(model->yield_threshold * 1000.0);
	e->max_delay_ns = model->max_delay_us * 1000u;
	for (unsigned int i = 0; i < JG_WHEEL_SLOTS; i++)
		e->wheel[i] = JG_INDEX_NONE;
	memset(e->wheel_occupied, 0, sizeof(e->wheel_occupied));
	e->burst_list = JG_INDEX_NONE;
	e->next_slot = UINT64_MAX; /* set by the first call */
}

void jg_flow_observe_arrival(struct jg_flow *f, uint32_t payload,
			     uint64_t now_ns)
{
	uint32_t now_us = (uint32_t)(now_ns / 1000);
	uint32_t elapsed;

	f->mean_payload =
		f->mean_payload == 0
			? (uint16_t)payload
			: (uint16_t)((7u * f->mean_payload + payload) / 8u);
	if (f->rate_window_bytes == 0 && !(f->flags & JG_FLOW_RATE_VALID) &&
	    f->rate_window_start_us == 0)
		f->rate_window_start_us = now_us;
	f->rate_window_bytes += payload;
	elapsed = now_us - f->rate_window_start_us;
	/* A window of at least 4 us spans several bursts (each burst shares
	 * one timestamp) yet learns a fast flow within a few dozen
	 * segments. */
	/* Bytes per millisecond, not per microsecond: a flow below 8 Mbps
	 * (under one byte per microsecond, as through a software switch)
	 * would otherwise measure 0 and never be allowed to wait. */
	if (elapsed >= 4) {
		uint32_t sample = (uint32_t)RTE_MIN(
			(uint64_t)f->rate_window_bytes * 1000u / elapsed,
			(uint64_t)UINT32_MAX / 4u);

		f->rate_bytes_per_ms =
			(f->flags & JG_FLOW_RATE_VALID)
				? (3u * f->rate_bytes_per_ms + sample) / 4u
				: sample;
		f->flags |= JG_FLOW_RATE_VALID;
		f->rate_window_start_us = now_us;
		f->rate_window_bytes = 0;
	}
}

void jg_observe_poll(struct jg_engine *e, uint64_t now_ns, bool brought_packets)
{
	/* The first poll has no gap; a pause longer than the delay bound
	 * says nothing about how often a busy port is polled. */
	if (brought_packets && e->last_poll_ns != 0 &&
	    now_ns > e->last_poll_ns) {
		uint32_t sample = (uint32_t)RTE_MIN(now_ns - e->last_poll_ns,
						    (uint64_t)e->max_delay_ns);

		e->poll_interval_ns =
			e->poll_interval_ns == 0
				? sample
				: (3u * e->poll_interval_ns + sample) / 4u;
	}
	e->last_poll_ns = now_ns;
}

/* Polls a new flow's run waits for the rest of its first burst. */
#define FIRST_BURST_POLLS 2u

uint32_t jg_flow_wait_budget(const struct jg_engine *e, const struct jg_flow *f,
			     uint32_t run_payload, uint32_t run_capacity,
			     uint32_t run_segments)
{
	uint32_t missing, segments, mean = RTE_MAX(f->mean_payload, 1u);
	double interarrival_ns, budget;

	if (e->config.delay.wait_always && run_payload < run_capacity)
		return e->max_delay_ns;
	/* A new flow has no rate yet (it takes a few microseconds of
	 * traffic), but a run of several segments from one poll shows a
	 * sender emitting back to back, and the rest of that burst may come
	 * one poll later: the sender's burst spanned two polls, or was
	 * longer than what one poll takes. Linux GRO holds a packet until
	 * its NAPI poll ends (napi_gro_flush from napi_complete_done); the
	 * engine lets such a run wait two poll intervals for the rest.
	 * Without it a new flow's first runs left short. */
	if (!(f->flags & JG_FLOW_RATE_VALID))
		return run_segments >= 2 && run_payload < run_capacity
			       ? RTE_MIN(FIRST_BURST_POLLS *
						 e->poll_interval_ns,
					 e->max_delay_ns)
			       : 0;
	if (f->rate_bytes_per_ms < e->rate_threshold_bytes_per_ms ||
	    f->rate_bytes_per_ms == 0 ||
	    f->yield_permille >= e->yield_threshold_permille ||
	    run_payload >= run_capacity)
		return 0;
	missing = run_capacity - run_payload;
	segments = RTE_MIN((missing + mean - 1) / mean, JG_ETM_MAX_SHAPE);
	interarrival_ns = (double)mean * 1e6 / f->rate_bytes_per_ms;
	budget = e->etm_quantile[segments] * interarrival_ns +
		 e->poll_interval_ns;
	return budget >= e->max_delay_ns ? e->max_delay_ns : (uint32_t)budget;
}

void jg_timer_unlink(struct jg_engine *e, struct jg_flow *f)
{
	if (f->timer_list == JG_TIMER_NONE)
		return;
	if (f->timer_list != JG_TIMER_BURST)
		e->wheel_flows--;
	if (f->timer_prev == JG_INDEX_NONE)
		*jg_timer_list(e, f->timer_list) = f->timer_next;
	else
		e->flows[f->timer_prev].timer_next = f->timer_next;
	if (f->timer_next != JG_INDEX_NONE)
		e->flows[f->timer_next].timer_prev = f->timer_prev;
	if (f->timer_list != JG_TIMER_BURST &&
	    e->wheel[f->timer_list] == JG_INDEX_NONE)
		e->wheel_occupied[f->timer_list / 64] &=
			~(1ull << (f->timer_list % 64));
	f->timer_list = JG_TIMER_NONE;
	f->timer_prev = f->timer_next = JG_INDEX_NONE;
}

static void link_flow(struct jg_engine *e, struct jg_flow *f, uint16_t list)
{
	uint32_t *head = jg_timer_list(e, list);
	uint32_t index = jg_flow_index(e, f);

	if (list != JG_TIMER_BURST) {
		e->wheel_flows++;
		e->wheel_occupied[list / 64] |= 1ull << (list % 64);
	}
	f->timer_list = list;
	f->timer_prev = JG_INDEX_NONE;
	f->timer_next = *head;
	if (*head != JG_INDEX_NONE)
		e->flows[*head].timer_prev = index;
	*head = index;
}

void jg_timer_schedule(struct jg_engine *e, struct jg_flow *f,
		       uint64_t deadline_ns)
{
	uint64_t slot = deadline_ns >> JG_WHEEL_SLOT_SHIFT;

	jg_timer_unlink(e, f);
	if (e->next_slot == UINT64_MAX)
		e->next_slot = e->now_ns >> JG_WHEEL_SLOT_SHIFT;
	/* A deadline inside a slot already passed is due now. */
	if (deadline_ns <= e->now_ns || slot < e->next_slot) {
		link_flow(e, f, JG_TIMER_BURST);
		return;
	}
	f->deadline_ns = (uint32_t)deadline_ns;
	link_flow(e, f, (uint16_t)(slot % JG_WHEEL_SLOTS));
}

uint64_t jg_wheel_next_occupied(const struct jg_engine *e, uint64_t from,
				uint64_t last)
{
	while (from <= last) {
		uint32_t position = (uint32_t)(from % JG_WHEEL_SLOTS);
		uint64_t word =
			e->wheel_occupied[position / 64] >> (position % 64);

		if (word != 0) {
			uint64_t found = from + (uint64_t)__builtin_ctzll(word);

			return found <= last ? found : UINT64_MAX;
		}
		/* The wheel is a whole number of words: the next word
		 * starts at the next multiple of 64, wrapped or not. */
		from += 64 - position % 64;
	}
	return UINT64_MAX;
}
