/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One direction of jumbogate-wanlink: what a WAN does to the packets that
 * cross it, as netem would, without netem (the lab's kernels lack it).
 *
 * A packet that arrives is lost with a seeded probability, dropped when the
 * direction already holds its limit (drop-tail), or kept: it waits for the
 * tokens of an optional token bucket (the rate cap), then for the one-way
 * delay, and leaves. Every kept packet waits the same delay after a
 * departure time that never decreases, so release times are in arrival
 * order and a ring suffices (no timer wheel, no reordering).
 *
 * Nothing here knows DPDK: packets are opaque pointers with a length, time
 * is in nanoseconds from the caller, so the model is tested on its own.
 */
#ifndef JUMBOGATE_WANLINK_LINK_H
#define JUMBOGATE_WANLINK_LINK_H

#include <stdbool.h>
#include <stdint.h>

struct wl_config {
	uint64_t delay_ns;    /* one way, added to every kept packet */
	double loss;	      /* probability a packet is lost, 0..1 */
	uint64_t seed;	      /* the loss pattern's seed */
	uint64_t rate_bps;    /* token bucket rate, bits/s; 0: no cap */
	uint32_t burst_bytes; /* the bucket's depth */
	uint32_t limit;	      /* most packets held at once */
};

struct wl_counters {
	uint64_t received; /* packets offered */
	uint64_t received_bytes;
	uint64_t largest;  /* bytes of the largest packet offered */
	uint64_t lost;	   /* dropped by the loss probability */
	uint64_t overflow; /* dropped because `limit` were held */
	uint64_t sent;	   /* released to the other side */
	uint64_t sent_bytes;
	uint64_t tx_refused; /* release attempts the port refused */
	uint64_t held_max;   /* most packets held at once */
	uint64_t shaped;     /* packets the bucket made wait */
};

struct wl_slot {
	void *packet;
	uint64_t release_ns;
};

struct wl_dir {
	struct wl_config config;
	uint64_t loss_threshold; /* a 64-bit draw below it loses the packet */
	uint64_t rng;		 /* splitmix64 state */
	uint64_t tat_ns;	 /* the bucket's theoretical arrival time */
	uint64_t tolerance_ns;	 /* the bucket's depth, as time at the rate */
	struct wl_slot *slots;
	uint32_t mask; /* slots - 1, a power of two minus one */
	uint32_t head;
	uint32_t held;
	struct wl_counters counters;
};

enum wl_verdict { WL_KEPT, WL_LOST, WL_OVERFLOW };

/* Sets up one direction; `salt` tells the two directions apart, so that each
 * draws its own loss pattern from the one seed. False when out of memory
 * or the configuration makes no sense (the reason in `error`). */
bool wl_dir_init(struct wl_dir *dir, const struct wl_config *config,
		 uint64_t salt, char *error, unsigned long error_length);
void wl_dir_free(struct wl_dir *dir);

/* Offers a packet of `bytes` at `now_ns`: the direction keeps it (WL_KEPT)
 * or the caller frees it. */
enum wl_verdict wl_dir_offer(struct wl_dir *dir, void *packet, uint32_t bytes,
			     uint64_t now_ns);

/* Up to `most` packets due by `now_ns`, oldest first, into `packets`; they
 * stay held until wl_dir_sent says how many the port took. */
uint32_t wl_dir_due(const struct wl_dir *dir, uint64_t now_ns, void **packets,
		    uint32_t most);
/* The first `count` due packets left, `bytes` of them in all; `refused`: the
 * port took fewer than were due (they are offered again). */
void wl_dir_sent(struct wl_dir *dir, uint32_t count, uint64_t bytes,
		 bool refused);

/* Lets go of the oldest `count` held packets unsent (their owner frees
 * them): what is still held when the program stops. */
void wl_dir_discard(struct wl_dir *dir, uint32_t count);

/* When the oldest held packet is due; UINT64_MAX when none is held. */
uint64_t wl_dir_next_release(const struct wl_dir *dir);

/* The n-th draw of the loss pattern (for the tests: the same seed gives the
 * same pattern). */
uint64_t wl_splitmix64(uint64_t *state);

#endif /* JUMBOGATE_WANLINK_LINK_H */
