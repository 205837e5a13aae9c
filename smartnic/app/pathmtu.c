/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery between borders; see pathmtu.h and docs/pathmtu.md.
 * Creation, the entry points of received packets and the operator's view;
 * the parts are in pathmtu_*.c (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_random.h>

void nic_pathmtu_config_init(struct nic_pmtu_config *config)
{
	*config = (struct nic_pmtu_config){
		.port = NIC_PMTU_DEFAULT_PORT,
		.probe_mtu = 9000,
		.capacity = NIC_PMTU_DEFAULT_CAPACITY,
		.reprobe_s = 600,
		.timeout_ms = 1000,
		.second_probe_ms = 5,
		.replies_per_s = 1000,
		.rounds_per_s = 100,
		.icmp_gap_s = 10,
		.prefix_rounds_per_min = 30,
	};
}

const char *nic_pathmtu_method_name(enum nic_pmtu_method method)
{
	switch (method) {
	case NIC_PMTU_METHOD_FRAGMENTS:
		return "fragments";
	case NIC_PMTU_METHOD_SIZES:
		return "sizes";
	case NIC_PMTU_METHOD_NONE:
		break;
	}
	return "none";
}

unsigned int pmtu_address_len(uint8_t version)
{
	return version == 4 ? 4 : 16;
}

/* Nonces and the hash keys keep off-path senders out, so they come from
 * the kernel's generator, not DPDK's predictable one. */
void pmtu_secure_random(void *out, size_t len)
{
	if (getrandom(out, len, 0) == (ssize_t)len)
		return;
	for (size_t at = 0; at < len; at += sizeof(uint64_t)) {
		uint64_t fallback = rte_rand() ^ rte_get_tsc_cycles();

		memcpy((uint8_t *)out + at, &fallback,
		       RTE_MIN(len - at, sizeof(fallback)));
	}
}

bool pmtu_take_token(struct token_bucket *bucket, uint64_t now_ns)
{
	if (now_ns > bucket->last_ns) {
		bucket->tokens += (double)(now_ns - bucket->last_ns) *
				  bucket->per_s / (double)PMTU_NS_PER_S;
		if (bucket->tokens > bucket->burst)
			bucket->tokens = bucket->burst;
		bucket->last_ns = now_ns;
	}
	if (bucket->tokens < 1.0)
		return false;
	bucket->tokens -= 1.0;
	return true;
}

void pmtu_budget_init(struct token_bucket *bucket, double per_s, double burst)
{
	*bucket = (struct token_bucket){
		.tokens = burst, .per_s = per_s, .burst = burst};
}

/* The probe lengths of a round, largest last: the usual MTUs below the
 * next hop's and the next hop's own. */
static void choose_sizes(struct nic_pathmtu *pm)
{
	static const uint16_t usual[] = {1280, 1500, 4000, 8000};

	pm->size_count = 0;
	for (unsigned int i = 0; i < RTE_DIM(usual); i++)
		if (usual[i] < pm->config.probe_mtu)
			pm->sizes[pm->size_count++] = usual[i];
	pm->sizes[pm->size_count++] = pm->config.probe_mtu;
}

struct nic_pathmtu *nic_pathmtu_create(const struct nic_pmtu_config *config,
				       struct rte_mempool *pool)
{
	struct nic_pathmtu *pm;
	uint32_t slots = 64;

	if (config->probe_mtu < 1280 || config->probe_mtu > MAX_PROBE_SIZE ||
	    config->capacity == 0 || config->replies_per_s == 0 ||
	    config->rounds_per_s == 0 || config->timeout_ms == 0 ||
	    config->prefix_rounds_per_min == 0) {
		rte_errno = EINVAL;
		return NULL;
	}
	while (slots < config->capacity)
		slots <<= 1;
	pm = rte_zmalloc("jg_pathmtu", sizeof(*pm), RTE_CACHE_LINE_SIZE);
	if (pm == NULL) {
		rte_errno = ENOMEM;
		return NULL;
	}
	pm->config = *config;
	pm->pool = pool;
	pm->port_be = rte_cpu_to_be_16(config->port);
	pm->mask = slots - 1;
	pm->bloom_mask = slots * BLOOM_PER_ENTRY - 1;
	pmtu_secure_random(pm->hash_key, sizeof(pm->hash_key));
	rte_spinlock_init(&pm->lock);
	rte_spinlock_init(&pm->reply_lock);
	for (unsigned int b = 0; b < FRAGMENT_BUCKETS; b++)
		rte_spinlock_init(&pm->groups[b].lock);
	pm->slots = rte_zmalloc("jg_pathmtu_slots", slots * sizeof(*pm->slots),
				RTE_CACHE_LINE_SIZE);
	pm->bloom = rte_zmalloc("jg_pathmtu_bloom", slots * BLOOM_PER_ENTRY,
				RTE_CACHE_LINE_SIZE);
	if (pm->slots == NULL || pm->bloom == NULL) {
		nic_pathmtu_free(pm);
		rte_errno = ENOMEM;
		return NULL;
	}
	pmtu_budget_init(&pm->round_budget, config->rounds_per_s,
			 config->rounds_per_s);
	pmtu_budget_init(
		&pm->reply_budget,
		(double)config->replies_per_s * REPLY_PREFIXES_AT_FULL_RATE,
		(double)config->replies_per_s * REPLY_PREFIXES_AT_FULL_RATE);
	for (unsigned int c = 0; c < PREFIX_CELLS; c++) {
		pmtu_budget_init(&pm->prefix_rounds[c],
				 config->prefix_rounds_per_min / 60.0,
				 config->prefix_rounds_per_min);
		pmtu_budget_init(&pm->prefix_replies[c], config->replies_per_s,
				 config->replies_per_s);
	}
	choose_sizes(pm);
	return pm;
}

void nic_pathmtu_free(struct nic_pathmtu *pm)
{
	if (pm == NULL)
		return;
	rte_free(pm->slots);
	rte_free((void *)pm->bloom);
	rte_free(pm);
}

uint16_t nic_pathmtu_round_size(const struct nic_pathmtu *pm)
{
	(void)pm;
	/* A usual round sends a fragment probe and size_count sizes; a
	 * refinement up to NIC_PMTU_MAX_PROBE_SIZES sizes. */
	return NIC_PMTU_MAX_PROBE_SIZES + 1;
}

bool nic_pathmtu_wants(const struct nic_pathmtu *pm,
		       const struct jg_packet_summary *packet)
{
	if (packet->key.protocol == IPPROTO_UDP)
		return packet->has_ports && packet->key.dst_port == pm->port_be;
	if (packet->key.protocol == IPPROTO_ICMP ||
	    packet->key.protocol == IPPROTO_ICMPV6)
		return true;
	/* Later IPv4 fragments show no ports: they may be a probe's. */
	return packet->key.protocol == 0 && packet->key.ip_version == 4;
}

bool nic_pathmtu_receive(struct nic_pathmtu *pm, struct rte_mbuf *m,
			 uint64_t now_ns, struct rte_mbuf **replies,
			 uint16_t *reply_count)
{
	struct pmtu_message message;
	struct parsed p;
	uint16_t udp_len = 0;

	*reply_count = 0;
	if (!pmtu_parse(m, &p, true))
		return false;
	if (p.fragment)
		return p.version == 4 &&
		       pmtu_take_fragment(pm, m, &p, now_ns, replies,
					  reply_count);
	if (p.protocol == IPPROTO_ICMP || p.protocol == IPPROTO_ICMPV6) {
		pmtu_take_icmp_error(pm, m, &p, now_ns);
		return false;
	}
	switch (pmtu_read_message(pm, m, &p, &message, &udp_len)) {
	case NOT_OURS:
		return false;
	case OURS_MALFORMED:
		COUNT(pm, probes_malformed);
		rte_pktmbuf_free(m);
		return true;
	case OURS:
		break;
	}
	if (message.type == TYPE_REPLY && message.version == PMTU_VERSION) {
		pmtu_take_reply(pm, m, &p, &message, udp_len, now_ns);
	} else if (message.type == TYPE_PROBE &&
		   pmtu_probe_is_valid(&message, &p, udp_len, true)) {
		uint16_t size = (uint16_t)p.ip_len;

		replies[0] =
			pmtu_answer(pm, rte_pktmbuf_mtod(m, const uint8_t *),
				    (uint8_t)RTE_MIN(p.l2_len, MAX_L2_LEN), &p,
				    &message, &size, 1, p.ip_len, now_ns);
		if (replies[0])
			*reply_count = 1;
	} else if (message.type == TYPE_REPLY) {
		COUNT(pm, replies_malformed);
	} else {
		COUNT(pm, probes_malformed);
	}
	rte_pktmbuf_free(m);
	return true;
}

/* ------------------------------------------------------------------ */
/* The operator's view */

static void view_of(const struct dest *d, uint64_t now_ns,
		    struct nic_pmtu_view *view)
{
	uint64_t since = d->mtu ? d->learned_ns : d->round_ns;

	memset(view, 0, sizeof(*view));
	view->ip_version = d->version;
	memcpy(view->addr, d->addr, sizeof(view->addr));
	view->mtu = d->mtu;
	view->method = (enum nic_pmtu_method)d->method;
	view->exact = d->mtu != 0 && d->exact;
	view->probing = d->state == DEST_PROBING;
	view->age_s = since && now_ns > since
			      ? (double)(now_ns - since) / PMTU_NS_PER_S
			      : 0.0;
	view->rtt_ms = (double)d->rtt_ns / PMTU_NS_PER_MS;
	view->round_ns = d->round_ns;
}

bool nic_pathmtu_view(struct nic_pathmtu *pm, uint8_t ip_version,
		      const uint8_t *addr, uint64_t now_ns,
		      struct nic_pmtu_view *view)
{
	struct dest *d;

	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, ip_version, addr, NULL);
	if (d != NULL)
		view_of(d, now_ns, view);
	rte_spinlock_unlock(&pm->lock);
	return d != NULL;
}

void nic_pathmtu_get_stats(const struct nic_pathmtu *pm,
			   struct nic_pmtu_stats *stats)
{
#define NIC_PMTU_COPY(name)                                                    \
	stats->name = __atomic_load_n(&pm->stats.name, __ATOMIC_RELAXED);
	NIC_PMTU_COUNTERS(NIC_PMTU_COPY)
#undef NIC_PMTU_COPY
	stats->destinations_now =
		__atomic_load_n(&pm->destinations_now, __ATOMIC_RELAXED);
	stats->learned_now =
		__atomic_load_n(&pm->learned_now, __ATOMIC_RELAXED);
}

unsigned int nic_pathmtu_list(struct nic_pathmtu *pm, uint64_t now_ns,
			      struct nic_pmtu_view *views, unsigned int cap)
{
	unsigned int count = 0;

	rte_spinlock_lock(&pm->lock);
	for (uint32_t s = 0; s <= pm->mask && count < cap; s++)
		if (pm->slots[s].used)
			view_of(&pm->slots[s], now_ns, &views[count++]);
	rte_spinlock_unlock(&pm->lock);
	return count;
}
