/* SPDX-License-Identifier: Apache-2.0 */
#include "link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NS_PER_S 1000000000ull

uint64_t wl_splitmix64(uint64_t *state)
{
	/* splitmix64: a seed reproduces the pattern on any machine and any
	 * DPDK version, which rte_rand does not promise. */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t ring_size(uint32_t limit)
{
	uint32_t size = 1;

	while (size < limit)
		size <<= 1;
	return size;
}

bool wl_dir_init(struct wl_dir *dir, const struct wl_config *config,
		 uint64_t salt, char *error, unsigned long error_length)
{
	uint32_t size;

	*dir = (struct wl_dir){.config = *config};
	if (!(config->loss >= 0.0 && config->loss <= 1.0)) {
		snprintf(error, error_length, "loss %g is not in 0..1",
			 config->loss);
		return false;
	}
	if (config->limit == 0 || config->limit > (1u << 24)) {
		snprintf(error, error_length,
			 "limit %u is not in 1..16777216 packets",
			 config->limit);
		return false;
	}
	if (config->rate_bps != 0 && config->burst_bytes == 0) {
		snprintf(error, error_length,
			 "a rate cap needs a bucket of at least one byte");
		return false;
	}
	/* A draw below the threshold loses the packet; 2^64 * p, saturated
	 * at 1 (every draw below UINT64_MAX, and that one too). */
	if (config->loss >= 1.0)
		dir->loss_threshold = UINT64_MAX;
	else
		dir->loss_threshold = (uint64_t)ldexp(config->loss, 64);
	dir->rng = config->seed ^ (salt * 0xd1b54a32d192ed03ull);
	if (config->rate_bps != 0)
		dir->tolerance_ns =
			(uint64_t)((double)config->burst_bytes * 8.0 *
				   NS_PER_S / (double)config->rate_bps);
	size = ring_size(config->limit);
	dir->slots = calloc(size, sizeof(*dir->slots));
	if (dir->slots == NULL) {
		snprintf(error, error_length, "no memory for %u slots", size);
		return false;
	}
	dir->mask = size - 1;
	return true;
}

void wl_dir_free(struct wl_dir *dir)
{
	free(dir->slots);
	dir->slots = NULL;
}

/* When the bucket lets a packet of `bytes` arriving at now_ns leave (a
 * generic cell rate algorithm, which is a token bucket: a full bucket lets
 * `burst_bytes` go at once, then one packet per its bytes at the rate).
 * Departures never go back in time, so neither do releases. */
static uint64_t departure(struct wl_dir *dir, uint32_t bytes, uint64_t now_ns)
{
	uint64_t cost_ns, leave_ns;

	if (dir->config.rate_bps == 0)
		return now_ns;
	cost_ns = (uint64_t)((double)bytes * 8.0 * NS_PER_S /
			     (double)dir->config.rate_bps);
	if (dir->tat_ns < now_ns)
		dir->tat_ns = now_ns;
	dir->tat_ns += cost_ns;
	leave_ns = dir->tat_ns > dir->tolerance_ns + now_ns
			   ? dir->tat_ns - dir->tolerance_ns
			   : now_ns;
	if (leave_ns > now_ns)
		dir->counters.shaped++;
	return leave_ns;
}

enum wl_verdict wl_dir_offer(struct wl_dir *dir, void *packet, uint32_t bytes,
			     uint64_t now_ns)
{
	struct wl_slot *slot;

	dir->counters.received++;
	dir->counters.received_bytes += bytes;
	if (bytes > dir->counters.largest)
		dir->counters.largest = bytes;
	/* The draw comes first and for every packet, so a packet's fate
	 * depends on its place in the sequence only, not on the queue. */
	if (dir->loss_threshold != 0 &&
	    wl_splitmix64(&dir->rng) < dir->loss_threshold) {
		dir->counters.lost++;
		return WL_LOST;
	}
	if (dir->held >= dir->config.limit) {
		dir->counters.overflow++;
		return WL_OVERFLOW;
	}
	slot = &dir->slots[(dir->head + dir->held) & dir->mask];
	slot->packet = packet;
	slot->release_ns = departure(dir, bytes, now_ns) + dir->config.delay_ns;
	dir->held++;
	if (dir->held > dir->counters.held_max)
		dir->counters.held_max = dir->held;
	return WL_KEPT;
}

uint32_t wl_dir_due(const struct wl_dir *dir, uint64_t now_ns, void **packets,
		    uint32_t most)
{
	uint32_t n = 0;

	while (n < most && n < dir->held) {
		const struct wl_slot *slot =
			&dir->slots[(dir->head + n) & dir->mask];

		if (slot->release_ns > now_ns)
			break;
		packets[n++] = slot->packet;
	}
	return n;
}

void wl_dir_sent(struct wl_dir *dir, uint32_t count, uint64_t bytes,
		 bool refused)
{
	wl_dir_discard(dir, count);
	dir->counters.sent += count;
	dir->counters.sent_bytes += bytes;
	if (refused)
		dir->counters.tx_refused++;
}

void wl_dir_discard(struct wl_dir *dir, uint32_t count)
{
	dir->head = (dir->head + count) & dir->mask;
	dir->held -= count;
}

uint64_t wl_dir_next_release(const struct wl_dir *dir)
{
	return dir->held ? dir->slots[dir->head].release_ns : UINT64_MAX;
}
