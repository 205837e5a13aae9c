/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The link model of jumbogate-wanlink (link.c) without ports: delays are
 * exact, the seeded loss is reproducible and binomial, the limit drops the
 * tail and counts it, the token bucket lets its depth through at once and
 * then paces at the rate.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

static int failures;

#define CHECK(condition)                                                       \
	do {                                                                   \
		if (!(condition)) {                                            \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,     \
				#condition);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

#define US 1000ull
#define MS 1000000ull

static char packets[64];

static struct wl_dir make(struct wl_config config, uint64_t salt)
{
	struct wl_dir dir;
	char error[128];

	if (!wl_dir_init(&dir, &config, salt, error, sizeof(error))) {
		fprintf(stderr, "wl_dir_init: %s\n", error);
		exit(1);
	}
	return dir;
}

/* Releases what is due at now_ns (all of it taken by the port). */
static uint32_t take(struct wl_dir *dir, uint64_t now_ns)
{
	void *due[64];
	uint32_t n = wl_dir_due(dir, now_ns, due, 64);

	wl_dir_sent(dir, n, 0, false);
	return n;
}

static void test_delay_is_exact_and_in_order(void)
{
	struct wl_dir dir =
		make((struct wl_config){.delay_ns = 5 * MS, .limit = 16}, 0);
	void *due[4];

	CHECK(wl_dir_offer(&dir, &packets[0], 1500, 100 * US) == WL_KEPT);
	CHECK(wl_dir_offer(&dir, &packets[1], 1500, 300 * US) == WL_KEPT);
	CHECK(wl_dir_next_release(&dir) == 5100 * US);
	CHECK(wl_dir_due(&dir, 5100 * US - 1, due, 4) == 0);
	CHECK(wl_dir_due(&dir, 5100 * US, due, 4) == 1 &&
	      due[0] == &packets[0]);
	/* Refused by the port: it stays first in line. */
	wl_dir_sent(&dir, 0, 0, true);
	CHECK(wl_dir_due(&dir, 6 * MS, due, 4) == 2 && due[1] == &packets[1]);
	wl_dir_sent(&dir, 2, 3000, false);
	CHECK(dir.counters.sent == 2 && dir.counters.sent_bytes == 3000);
	CHECK(dir.counters.largest == 1500);
	CHECK(dir.counters.tx_refused == 1);
	CHECK(wl_dir_next_release(&dir) == UINT64_MAX);
	wl_dir_free(&dir);
}

static uint64_t lost_of(double loss, uint64_t seed, uint64_t salt,
			uint32_t count, uint8_t *pattern)
{
	struct wl_dir dir = make(
		(struct wl_config){.loss = loss, .seed = seed, .limit = 64},
		salt);
	uint64_t lost;

	for (uint32_t i = 0; i < count; i++) {
		enum wl_verdict v = wl_dir_offer(&dir, &packets[0], 100, i);

		if (pattern)
			pattern[i] = v == WL_LOST;
		take(&dir, i);
	}
	lost = dir.counters.lost;
	CHECK(dir.counters.sent + lost == count);
	wl_dir_free(&dir);
	return lost;
}

static void test_loss_is_binomial_and_seeded(void)
{
	enum { N = 200000 };
	static uint8_t a[N], b[N], c[N];
	const double p = 0.01, mean = N * p, sd = sqrt(N * p * (1 - p));
	uint64_t lost = lost_of(p, 42, 0, N, a);

	/* Five standard deviations: a false alarm once in millions. */
	CHECK(fabs((double)lost - mean) < 5 * sd);
	CHECK(lost_of(p, 42, 0, N, b) == lost && memcmp(a, b, N) == 0);
	lost_of(p, 43, 0, N, c);
	CHECK(memcmp(a, c, N) != 0);
	/* The other direction draws its own pattern from the same seed. */
	lost_of(p, 42, 1, N, c);
	CHECK(memcmp(a, c, N) != 0);
	CHECK(lost_of(0.0, 42, 0, N, NULL) == 0);
	CHECK(lost_of(1.0, 42, 0, N, NULL) == N);
	/* The paper's 0.01%: 10 in 100000 on average. */
	lost = lost_of(0.0001, 7, 0, 1000000, NULL);
	CHECK(fabs((double)lost - 100.0) < 5 * sqrt(100.0));
	printf("loss: %" PRIu64 " of 1000000 at 0.0001\n", lost);
}

static void test_limit_drops_the_tail(void)
{
	struct wl_dir dir =
		make((struct wl_config){.delay_ns = 10 * MS, .limit = 10}, 0);
	uint32_t kept = 0;

	for (int i = 0; i < 25; i++)
		kept += wl_dir_offer(&dir, &packets[i], 1500, 0) == WL_KEPT;
	CHECK(kept == 10 && dir.counters.overflow == 15);
	CHECK(dir.counters.held_max == 10);
	CHECK(take(&dir, 10 * MS) == 10);
	CHECK(wl_dir_offer(&dir, &packets[0], 1500, 10 * MS) == WL_KEPT);
	CHECK(dir.counters.overflow == 15 && dir.counters.received == 26);
	wl_dir_free(&dir);
}

static void test_bucket_bursts_then_paces(void)
{
	/* 8 Mbit/s: one byte a microsecond; a bucket of three packets. */
	struct wl_dir dir = make((struct wl_config){.delay_ns = 1 * MS,
						    .rate_bps = 8000000,
						    .burst_bytes = 3000,
						    .limit = 64},
				 0);
	uint64_t release[10];

	for (int i = 0; i < 10; i++) {
		CHECK(wl_dir_offer(&dir, &packets[i], 1000, 0) == WL_KEPT);
		release[i] = dir.slots[i].release_ns;
	}
	for (int i = 0; i < 3; i++)
		CHECK(release[i] == 1 * MS);
	for (int i = 3; i < 10; i++)
		CHECK(release[i] == 1 * MS + (uint64_t)(i - 2) * MS);
	CHECK(dir.counters.shaped == 7);
	/* Idle long enough, the bucket is full again. */
	CHECK(take(&dir, 20 * MS) == 10);
	CHECK(wl_dir_offer(&dir, &packets[0], 1000, 100 * MS) == WL_KEPT);
	CHECK(wl_dir_next_release(&dir) == 101 * MS);
	wl_dir_free(&dir);
}

static void test_rejects_nonsense(void)
{
	struct wl_dir dir;
	char error[128];

	CHECK(!wl_dir_init(&dir, &(struct wl_config){.loss = 1.5, .limit = 1},
			   0, error, sizeof(error)));
	CHECK(!wl_dir_init(&dir, &(struct wl_config){.limit = 0}, 0, error,
			   sizeof(error)));
	CHECK(!wl_dir_init(&dir, &(struct wl_config){.rate_bps = 1, .limit = 1},
			   0, error, sizeof(error)));
}

int main(void)
{
	test_delay_is_exact_and_in_order();
	test_loss_is_binomial_and_seeded();
	test_limit_drops_the_tail();
	test_bucket_bursts_then_paces();
	test_rejects_nonsense();
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
