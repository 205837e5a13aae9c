/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery between borders; see pathmtu.h and docs/pathmtu.md. */
#include "pathmtu.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_random.h>
#include <rte_spinlock.h>
#include <rte_udp.h>

#define PMTU_MAGIC   0x4a47504du /* "JGPM" */
#define PMTU_VERSION 1
#define TYPE_PROBE   1
#define TYPE_REPLY   2
/* Fragment data comes in multiples of 8 bytes, so no IP packet shorter
 * than this can be a probe or fragment worth reporting. */
#define MIN_REPORTED_SIZE 68u
#define MAX_PROBE_SIZE	  9216u
#define MAX_L2_LEN	  (RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN)
/* A destination is looked for in this many neighbouring slots. */
#define WINDOW 8
/* Bloom filter counters per tracked destination. */
#define BLOOM_PER_ENTRY 16
/* Rounds under way at once; more are suppressed (and counted). */
#define MAX_ACTIVE_ROUNDS 256
#define FRAGMENT_GROUPS	  256
/* Operator-requested rounds waiting for their port's poll. */
#define MAX_REQUESTS 16
/* A probe whose fragments have not all come by then is forgotten. */
#define FRAGMENT_TIMEOUT_NS (2ull * 1000 * 1000 * 1000)
/* An outbound packet refreshes its destination's use at most this often. */
#define USE_GRANULARITY_NS (1000ull * 1000 * 1000)
/* A destination refused a round (over budget) asks again after this. */
#define SUPPRESSED_RETRY_NS (100ull * 1000 * 1000)
/* Expiry looks at this many slots per poll of port 0 ... */
#define SWEEP_SLOTS 64
/* A round toward an exact value waits for its answers this many round
 * trips (of the first reply) after its second copy, plus REFINE_SLACK_NS;
 * never longer than a round's timeout. Replies lost meanwhile only make
 * the value lower, which is safe. */
#define REFINE_WAIT_RTTS 3
#define REFINE_SLACK_NS	 (5ull * 1000 * 1000)
/* ... at most this often. */
#define SWEEP_INTERVAL_NS (10ull * 1000 * 1000)
#define PMTU_NS_PER_S	  (1000ull * 1000 * 1000)
#define PMTU_NS_PER_MS	  (1000ull * 1000)

/* The probe and reply payload (docs/pathmtu.md); network byte order. */
struct pmtu_message {
	rte_be32_t magic;
	uint8_t version;
	uint8_t type;
	uint8_t kind;  /* enum nic_pmtu_method of the probe */
	uint8_t count; /* reply: sizes that follow */
	uint8_t nonce[8];
	rte_be16_t probe_size; /* IP length the prober sent */
	rte_be16_t reserved;
} __rte_packed;

#define MESSAGE_LEN sizeof(struct pmtu_message)
_Static_assert(MESSAGE_LEN == 20, "the wire format has a 20-byte header");

struct parsed {
	uint16_t l2_len;
	uint8_t version;
	uint16_t l3_len;
	uint32_t ip_len;
	uint16_t ip_id;
	bool fragment;
	bool more_fragments;
	uint32_t fragment_offset; /* bytes */
	uint8_t protocol;
	uint32_t l4_offset;
	uint32_t l4_len; /* IP payload bytes in this packet */
	uint8_t src[16], dst[16];
};

enum dest_state { DEST_IDLE, DEST_PROBING };

struct dest {
	atomic_uint seq; /* odd while a writer changes the slot */
	bool used;
	uint8_t version;
	uint16_t mtu; /* learned; 0: none */
	uint8_t addr[16];
	_Atomic uint64_t next_round_ns;
	_Atomic uint64_t used_ns;
	/* Below: read and written under the lock only. */
	uint8_t state;
	uint8_t method;
	uint8_t port_index;
	uint8_t copies_sent;
	uint16_t round_mtu;
	uint8_t round_method;
	/* The round's sized probes: the usual set, or a refinement's sizes
	 * between what passed and what did not. */
	uint16_t round_sizes[NIC_PMTU_MAX_PROBE_SIZES];
	uint8_t round_size_count;
	uint8_t round_arrived; /* bit per round_sizes entry answered */
	bool refining;	       /* this round narrows [round_mtu, refine_hi) */
	bool exact_wanted;     /* the operator asked for the exact value */
	bool exact;	       /* mtu is the exact path MTU */
	uint8_t refine_rounds;
	uint16_t refine_hi; /* the least size known not to pass */
	uint8_t l2_len;
	uint8_t l2[MAX_L2_LEN];
	uint8_t src[16];
	uint8_t nonce[8];
	uint64_t round_ns;
	uint64_t learned_ns;
	uint64_t rtt_ns;
	uint32_t bloom[2];
};

struct fragment_group {
	bool used;
	bool first_seen;
	bool is_probe;
	uint8_t count;
	uint16_t id;
	uint32_t src, dst;
	uint64_t first_ns;
	uint32_t covered;
	int32_t end; /* -1 until the last fragment came */
	uint32_t probe_bytes;
	uint16_t offsets[NIC_PMTU_MAX_FRAGMENTS];
	uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
	struct pmtu_message message;
	uint8_t l2_len;
	uint8_t l2[MAX_L2_LEN];
};

struct token_bucket {
	double tokens;
	double per_s;
	uint64_t last_ns;
};

struct nic_pathmtu {
	struct nic_pmtu_config config;
	struct rte_mempool *pool;
	rte_be16_t port_be;
	uint32_t mask;
	uint32_t bloom_mask;
	uint32_t seed;
	rte_spinlock_t lock;
	struct dest *slots;
	_Atomic uint8_t *bloom;
	uint16_t sizes[NIC_PMTU_MAX_PROBE_SIZES];
	unsigned int size_count;
	uint32_t active[MAX_ACTIVE_ROUNDS];
	unsigned int active_count;
	atomic_uint active_ports; /* bit per port with rounds under way */
	/* Rounds the operator asked for, started by the next poll of their
	 * port (slot indices). */
	uint32_t requested[MAX_REQUESTS];
	unsigned int requested_count;
	uint32_t sweep_cursor;
	uint64_t next_sweep_ns;
	struct fragment_group groups[FRAGMENT_GROUPS];
	struct token_bucket reply_budget;
	struct token_bucket round_budget;
	uint64_t destinations_now;
	uint64_t learned_now;
	struct nic_pmtu_stats stats; /* counters: atomic adds */
};

#define COUNT(pm, field)                                                       \
	__atomic_add_fetch(&(pm)->stats.field, 1, __ATOMIC_RELAXED)

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

static unsigned int address_len(uint8_t version)
{
	return version == 4 ? 4 : 16;
}

/* Nonces and the hash seed keep off-path senders out, so they come from
 * the kernel's generator, not DPDK's predictable one. */
static void secure_random(void *out, size_t len)
{
	if (getrandom(out, len, 0) != (ssize_t)len) {
		uint64_t fallback = rte_rand() ^ rte_get_tsc_cycles();

		memcpy(out, &fallback, RTE_MIN(len, sizeof(fallback)));
	}
}

static bool take_token(struct token_bucket *bucket, uint64_t now_ns)
{
	if (now_ns > bucket->last_ns) {
		bucket->tokens += (double)(now_ns - bucket->last_ns) *
				  bucket->per_s / (double)PMTU_NS_PER_S;
		if (bucket->tokens > bucket->per_s)
			bucket->tokens = bucket->per_s;
		bucket->last_ns = now_ns;
	}
	if (bucket->tokens < 1.0)
		return false;
	bucket->tokens -= 1.0;
	return true;
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
	    config->rounds_per_s == 0 || config->timeout_ms == 0) {
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
	secure_random(&pm->seed, sizeof(pm->seed));
	rte_spinlock_init(&pm->lock);
	pm->slots = rte_zmalloc("jg_pathmtu_slots", slots * sizeof(*pm->slots),
				RTE_CACHE_LINE_SIZE);
	pm->bloom = rte_zmalloc("jg_pathmtu_bloom", slots * BLOOM_PER_ENTRY,
				RTE_CACHE_LINE_SIZE);
	if (pm->slots == NULL || pm->bloom == NULL) {
		nic_pathmtu_free(pm);
		rte_errno = ENOMEM;
		return NULL;
	}
	pm->reply_budget =
		(struct token_bucket){.tokens = config->replies_per_s,
				      .per_s = config->replies_per_s};
	pm->round_budget = (struct token_bucket){.tokens = config->rounds_per_s,
						 .per_s = config->rounds_per_s};
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

/* ------------------------------------------------------------------ */
/* The destination table: seqlock readers, one writer at a time         */

static uint32_t hash_address(const struct nic_pathmtu *pm, uint8_t version,
			     const uint8_t *addr, uint32_t salt)
{
	/* rte_hash_crc reads 4 and 8 bytes at a time: addresses come from
	 * anywhere in a packet, so they are hashed from an aligned copy. */
	uint64_t aligned[2] = {0, 0};

	memcpy(aligned, addr, address_len(version));
	return rte_hash_crc(aligned, address_len(version),
			    pm->seed ^ salt ^ version);
}

static void bloom_indices(const struct nic_pathmtu *pm, uint8_t version,
			  const uint8_t *addr, uint32_t out[2])
{
	out[0] = hash_address(pm, version, addr, 0x9e3779b9u) & pm->bloom_mask;
	out[1] = hash_address(pm, version, addr, 0x7f4a7c15u) & pm->bloom_mask;
}

static bool bloom_may_hold(const struct nic_pathmtu *pm, uint8_t version,
			   const uint8_t *addr)
{
	uint32_t index[2];

	bloom_indices(pm, version, addr, index);
	return atomic_load_explicit(&pm->bloom[index[0]],
				    memory_order_relaxed) != 0 &&
	       atomic_load_explicit(&pm->bloom[index[1]],
				    memory_order_relaxed) != 0;
}

/* Counters stuck at the top stay there: decrementing one could drop
 * another destination's membership. */
static void bloom_change(struct nic_pathmtu *pm, const uint32_t index[2],
			 int delta)
{
	for (int i = 0; i < 2; i++) {
		uint8_t value = atomic_load_explicit(&pm->bloom[index[i]],
						     memory_order_relaxed);

		if (value == UINT8_MAX || (delta < 0 && value == 0))
			continue;
		atomic_store_explicit(&pm->bloom[index[i]],
				      (uint8_t)(value + delta),
				      memory_order_relaxed);
	}
}

static void write_begin(struct dest *d)
{
	unsigned int seq = atomic_load_explicit(&d->seq, memory_order_relaxed);

	atomic_store_explicit(&d->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_end(struct dest *d)
{
	unsigned int seq = atomic_load_explicit(&d->seq, memory_order_relaxed);

	atomic_store_explicit(&d->seq, seq + 1, memory_order_release);
}

struct dest_read {
	bool match;
	uint16_t mtu;
};

/* What a slot says about (version, addr), read without the lock. */
static struct dest_read read_slot(struct dest *d, uint8_t version,
				  const uint8_t *addr)
{
	struct dest_read result;
	unsigned int before, after;

	do {
		before = atomic_load_explicit(&d->seq, memory_order_acquire);
		while (before & 1) {
			rte_pause();
			before = atomic_load_explicit(&d->seq,
						      memory_order_acquire);
		}
		result.match = d->used && d->version == version &&
			       memcmp(d->addr, addr, address_len(version)) == 0;
		result.mtu = d->mtu;
		atomic_thread_fence(memory_order_acquire);
		after = atomic_load_explicit(&d->seq, memory_order_relaxed);
	} while (before != after);
	return result;
}

static struct dest *find(struct nic_pathmtu *pm, uint8_t version,
			 const uint8_t *addr, uint16_t *mtu)
{
	uint32_t start = hash_address(pm, version, addr, 0);

	for (uint32_t i = 0; i < WINDOW; i++) {
		struct dest *d = &pm->slots[(start + i) & pm->mask];
		struct dest_read read = read_slot(d, version, addr);

		if (read.match) {
			if (mtu)
				*mtu = read.mtu;
			return d;
		}
	}
	return NULL;
}

uint16_t nic_pathmtu_learned(const void *context, uint8_t ip_version,
			     const uint8_t *dst)
{
	struct nic_pathmtu *pm = (struct nic_pathmtu *)context;
	uint16_t mtu = 0;

	if (!bloom_may_hold(pm, ip_version, dst))
		return 0;
	return find(pm, ip_version, dst, &mtu) ? mtu : 0;
}

/* Under the lock: a learned MTU for d, or none (0). */
static void set_mtu(struct nic_pathmtu *pm, struct dest *d, uint16_t mtu,
		    uint8_t method, uint64_t now_ns)
{
	if ((d->mtu == 0) != (mtu == 0)) {
		bloom_change(pm, d->bloom, mtu ? 1 : -1);
		if (mtu)
			pm->learned_now++;
		else
			pm->learned_now--;
	}
	write_begin(d);
	d->mtu = mtu;
	write_end(d);
	d->method = mtu ? method : NIC_PMTU_METHOD_NONE;
	d->learned_ns = now_ns;
}

static void remove_active(struct nic_pathmtu *pm, uint32_t slot)
{
	for (unsigned int i = 0; i < pm->active_count; i++)
		if (pm->active[i] == slot) {
			pm->active[i] = pm->active[--pm->active_count];
			return;
		}
}

/* Under the lock. */
static void release(struct nic_pathmtu *pm, struct dest *d)
{
	set_mtu(pm, d, 0, NIC_PMTU_METHOD_NONE, 0);
	if (d->state == DEST_PROBING)
		remove_active(pm, (uint32_t)(d - pm->slots));
	write_begin(d);
	d->used = false;
	write_end(d);
	d->state = DEST_IDLE;
	pm->destinations_now--;
}

static uint64_t expiry_ns(const struct nic_pathmtu *pm)
{
	return 2ull * pm->config.reprobe_s * PMTU_NS_PER_S;
}

/* Under the lock: a slot for a new destination, evicting the least
 * recently used of its window when all are taken. */
static struct dest *insert(struct nic_pathmtu *pm, uint8_t version,
			   const uint8_t *addr, uint64_t now_ns)
{
	uint32_t start = hash_address(pm, version, addr, 0);
	struct dest *victim = NULL;

	for (uint32_t i = 0; i < WINDOW; i++) {
		struct dest *d = &pm->slots[(start + i) & pm->mask];

		if (!d->used) {
			victim = d;
			break;
		}
		if (victim == NULL || d->used_ns < victim->used_ns)
			victim = d;
	}
	if (victim->used) {
		COUNT(pm, destinations_evicted);
		release(pm, victim);
	}
	memset(victim->addr, 0, sizeof(victim->addr));
	memcpy(victim->addr, addr, address_len(version));
	victim->version = version;
	victim->state = DEST_IDLE;
	victim->method = NIC_PMTU_METHOD_NONE;
	victim->learned_ns = 0;
	victim->round_ns = 0;
	victim->rtt_ns = 0;
	victim->exact = false;
	victim->exact_wanted = false;
	victim->refining = false;
	bloom_indices(pm, version, addr, victim->bloom);
	atomic_store_explicit(&victim->used_ns, now_ns, memory_order_relaxed);
	atomic_store_explicit(&victim->next_round_ns, 0, memory_order_relaxed);
	write_begin(victim);
	victim->used = true;
	victim->mtu = 0;
	write_end(victim);
	pm->destinations_now++;
	return victim;
}

/* ------------------------------------------------------------------ */
/* Packets                                                              */

static bool parse(const struct rte_mbuf *m, struct parsed *p)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t present = rte_pktmbuf_data_len(m);
	uint16_t ether_type;
	uint32_t offset = RTE_ETHER_HDR_LEN;

	memset(p, 0, sizeof(*p));
	if (present < RTE_ETHER_HDR_LEN)
		return false;
	memcpy(&ether_type, data + 12, 2);
	for (int tags = 0;
	     tags < 2 && (ether_type == RTE_BE16(RTE_ETHER_TYPE_VLAN) ||
			  ether_type == RTE_BE16(RTE_ETHER_TYPE_QINQ));
	     tags++) {
		if (present < offset + RTE_VLAN_HLEN)
			return false;
		memcpy(&ether_type, data + offset + 2, 2);
		offset += RTE_VLAN_HLEN;
	}
	p->l2_len = (uint16_t)offset;
	if (ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV4)) {
		const struct rte_ipv4_hdr *ip;
		uint16_t fragment;

		if (present < offset + sizeof(*ip))
			return false;
		ip = (const struct rte_ipv4_hdr *)(data + offset);
		p->version = 4;
		p->l3_len = (uint16_t)((ip->version_ihl & 0xf) * 4);
		p->ip_len = rte_be_to_cpu_16(ip->total_length);
		if ((ip->version_ihl >> 4) != 4 || p->l3_len < sizeof(*ip) ||
		    p->ip_len < p->l3_len || present < offset + p->ip_len)
			return false;
		fragment = rte_be_to_cpu_16(ip->fragment_offset);
		p->more_fragments = (fragment & RTE_IPV4_HDR_MF_FLAG) != 0;
		p->fragment_offset =
			(uint32_t)(fragment & RTE_IPV4_HDR_OFFSET_MASK) * 8;
		p->fragment = p->more_fragments || p->fragment_offset != 0;
		p->ip_id = rte_be_to_cpu_16(ip->packet_id);
		p->protocol = ip->next_proto_id;
		memcpy(p->src, &ip->src_addr, 4);
		memcpy(p->dst, &ip->dst_addr, 4);
	} else if (ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV6)) {
		const struct rte_ipv6_hdr *ip;

		if (present < offset + sizeof(*ip))
			return false;
		ip = (const struct rte_ipv6_hdr *)(data + offset);
		p->version = 6;
		p->l3_len = sizeof(*ip);
		p->ip_len = sizeof(*ip) + rte_be_to_cpu_16(ip->payload_len);
		/* Probes and replies carry no extension headers. */
		p->protocol = ip->proto;
		if (present < offset + p->ip_len)
			return false;
		memcpy(p->src, ip->src_addr, 16);
		memcpy(p->dst, ip->dst_addr, 16);
	} else {
		return false;
	}
	p->l4_offset = offset + p->l3_len;
	p->l4_len = p->ip_len - p->l3_len;
	return true;
}

enum message_read { NOT_OURS, OURS, OURS_MALFORMED };

/* The message of a whole datagram or a first fragment between two of our
 * ports: NOT_OURS when it is someone else's UDP, OURS_MALFORMED when it
 * carries our magic but is too short to hold the header. */
static enum message_read read_message(const struct nic_pathmtu *pm,
				      const struct rte_mbuf *m,
				      const struct parsed *p,
				      struct pmtu_message *message,
				      uint16_t *udp_len)
{
	struct rte_udp_hdr udp;
	rte_be32_t magic;

	if (p->protocol != IPPROTO_UDP ||
	    p->l4_len < sizeof(udp) + sizeof(magic))
		return NOT_OURS;
	memcpy(&udp, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset),
	       sizeof(udp));
	memcpy(&magic,
	       rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + sizeof(udp)),
	       sizeof(magic));
	if (udp.dst_port != pm->port_be || udp.src_port != pm->port_be ||
	    magic != RTE_BE32(PMTU_MAGIC))
		return NOT_OURS;
	if (p->l4_len < sizeof(udp) + MESSAGE_LEN)
		return OURS_MALFORMED;
	memcpy(message,
	       rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + sizeof(udp)),
	       MESSAGE_LEN);
	*udp_len = rte_be_to_cpu_16(udp.dgram_len);
	return OURS;
}

/* A packet of ip_len bytes with l2 in front, from src to dst, carrying
 * message and then sizes (or zeros up to ip_len). */
static struct rte_mbuf *build(struct nic_pathmtu *pm, const uint8_t *l2,
			      uint8_t l2_len, uint8_t version,
			      const uint8_t *src, const uint8_t *dst,
			      uint32_t ip_len, bool dont_fragment,
			      const struct pmtu_message *message,
			      const uint16_t *sizes, uint8_t count)
{
	uint32_t l3_len = version == 4 ? sizeof(struct rte_ipv4_hdr)
				       : sizeof(struct rte_ipv6_hdr);
	struct rte_mbuf *m = rte_pktmbuf_alloc(pm->pool);
	struct rte_udp_hdr *udp;
	uint8_t *data, *payload;

	if (m == NULL) {
		COUNT(pm, buffers_exhausted);
		return NULL;
	}
	data = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(l2_len + ip_len));
	if (data == NULL) {
		rte_pktmbuf_free(m);
		COUNT(pm, buffers_exhausted);
		return NULL;
	}
	memset(data, 0, l2_len + ip_len);
	memcpy(data, l2, l2_len);
	udp = (struct rte_udp_hdr *)(data + l2_len + l3_len);
	udp->src_port = pm->port_be;
	udp->dst_port = pm->port_be;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(ip_len - l3_len));
	payload = (uint8_t *)(udp + 1);
	memcpy(payload, message, MESSAGE_LEN);
	for (uint8_t i = 0; i < count; i++) {
		rte_be16_t size = rte_cpu_to_be_16(sizes[i]);

		memcpy(payload + MESSAGE_LEN + 2 * i, &size, 2);
	}
	if (version == 4) {
		struct rte_ipv4_hdr *ip =
			(struct rte_ipv4_hdr *)(data + l2_len);

		ip->version_ihl = RTE_IPV4_VHL_DEF;
		ip->total_length = rte_cpu_to_be_16((uint16_t)ip_len);
		ip->packet_id = rte_cpu_to_be_16((uint16_t)rte_rand());
		ip->fragment_offset =
			dont_fragment ? RTE_BE16(RTE_IPV4_HDR_DF_FLAG) : 0;
		ip->time_to_live = 64;
		ip->next_proto_id = IPPROTO_UDP;
		memcpy(&ip->src_addr, src, 4);
		memcpy(&ip->dst_addr, dst, 4);
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	} else {
		struct rte_ipv6_hdr *ip =
			(struct rte_ipv6_hdr *)(data + l2_len);

		ip->vtc_flow = RTE_BE32(6u << 28);
		ip->payload_len = rte_cpu_to_be_16((uint16_t)(ip_len - l3_len));
		ip->proto = IPPROTO_UDP;
		ip->hop_limits = 64;
		memcpy(ip->src_addr, src, 16);
		memcpy(ip->dst_addr, dst, 16);
		udp->dgram_cksum = rte_ipv6_udptcp_cksum(ip, udp);
	}
	return m;
}

/* ------------------------------------------------------------------ */
/* The prober                                                           */

static uint16_t send_round(struct nic_pathmtu *pm, struct dest *d,
			   struct rte_mbuf **probes, uint16_t cap)
{
	struct pmtu_message message = {
		.magic = RTE_BE32(PMTU_MAGIC),
		.version = PMTU_VERSION,
		.type = TYPE_PROBE,
	};
	uint16_t count = 0;

	memcpy(message.nonce, d->nonce, sizeof(message.nonce));
	/* IPv4: one probe of the next hop's MTU that routers may fragment
	 * (a refinement knows the fragments' answer already). */
	if (d->version == 4 && !d->refining && count < cap) {
		message.kind = NIC_PMTU_METHOD_FRAGMENTS;
		message.probe_size = rte_cpu_to_be_16(pm->config.probe_mtu);
		probes[count] =
			build(pm, d->l2, d->l2_len, 4, d->src, d->addr,
			      pm->config.probe_mtu, false, &message, NULL, 0);
		if (probes[count])
			count++;
	}
	message.kind = NIC_PMTU_METHOD_SIZES;
	for (unsigned int i = 0; i < d->round_size_count && count < cap; i++) {
		message.probe_size = rte_cpu_to_be_16(d->round_sizes[i]);
		probes[count] =
			build(pm, d->l2, d->l2_len, d->version, d->src, d->addr,
			      d->round_sizes[i], true, &message, NULL, 0);
		if (probes[count])
			count++;
	}
	d->copies_sent++;
	__atomic_add_fetch(&pm->stats.probes_sent, count, __ATOMIC_RELAXED);
	return count;
}

/* Under the lock: how probes to d are addressed, from an outbound packet
 * to it (its Ethernet header and source, the port it came in on). */
static void remember_sender(struct dest *d, const struct rte_mbuf *m,
			    const struct parsed *p, unsigned int port_index)
{
	d->l2_len = (uint8_t)RTE_MIN(p->l2_len, MAX_L2_LEN);
	memcpy(d->l2, rte_pktmbuf_mtod(m, const uint8_t *), d->l2_len);
	memcpy(d->src, p->src, sizeof(d->src));
	d->port_index = (uint8_t)port_index;
}

static uint16_t start_round(struct nic_pathmtu *pm, struct dest *d,
			    uint64_t now_ns, struct rte_mbuf **probes,
			    uint16_t cap)
{
	if (pm->active_count == MAX_ACTIVE_ROUNDS ||
	    !take_token(&pm->round_budget, now_ns)) {
		COUNT(pm, rounds_suppressed);
		atomic_store_explicit(&d->next_round_ns,
				      now_ns + SUPPRESSED_RETRY_NS,
				      memory_order_relaxed);
		return 0;
	}
	secure_random(d->nonce, sizeof(d->nonce));
	d->state = DEST_PROBING;
	d->copies_sent = 0;
	d->round_mtu = 0;
	d->round_method = NIC_PMTU_METHOD_NONE;
	d->round_ns = now_ns;
	d->rtt_ns = 0;
	memcpy(d->round_sizes, pm->sizes, sizeof(d->round_sizes));
	d->round_size_count = (uint8_t)pm->size_count;
	d->round_arrived = 0;
	d->refining = false;
	d->refine_rounds = 0;
	d->exact = false;
	pm->active[pm->active_count++] = (uint32_t)(d - pm->slots);
	atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	atomic_store_explicit(&d->next_round_ns,
			      now_ns + pm->config.reprobe_s * PMTU_NS_PER_S,
			      memory_order_relaxed);
	COUNT(pm, rounds_started);
	return send_round(pm, d, probes, cap);
}

uint16_t nic_pathmtu_note_outbound(struct nic_pathmtu *pm,
				   const struct rte_mbuf *m,
				   const struct jg_packet_summary *packet,
				   unsigned int port_index, uint64_t now_ns,
				   struct rte_mbuf **probes, uint16_t cap)
{
	const uint8_t *dst = packet->key.ip_version == 4
				     ? (const uint8_t *)&packet->key.dst.v4
				     : packet->key.dst.v6;
	struct dest *d = find(pm, packet->key.ip_version, dst, NULL);
	struct parsed p;
	uint16_t sent = 0;

	if (d != NULL) {
		if (now_ns - atomic_load_explicit(&d->used_ns,
						  memory_order_relaxed) >
		    USE_GRANULARITY_NS)
			atomic_store_explicit(&d->used_ns, now_ns,
					      memory_order_relaxed);
		if (now_ns < atomic_load_explicit(&d->next_round_ns,
						  memory_order_relaxed))
			return 0;
	}
	if (port_index >= 32 || !parse(m, &p))
		return 0;
	rte_spinlock_lock(&pm->lock);
	d = find(pm, packet->key.ip_version, dst, NULL);
	if (d == NULL)
		d = insert(pm, packet->key.ip_version, dst, now_ns);
	if (now_ns >= atomic_load_explicit(&d->next_round_ns,
					   memory_order_relaxed) &&
	    d->state != DEST_PROBING) {
		remember_sender(d, m, &p, port_index);
		sent = start_round(pm, d, now_ns, probes, cap);
	}
	rte_spinlock_unlock(&pm->lock);
	return sent;
}

/* The least size this round sent above round_mtu that did not come
 * back; 0 when none did not. A fragment answer also bounds it: fragment
 * data comes in multiples of 8, so the path carries less than 8 more. */
static uint16_t least_failed_size(const struct dest *d)
{
	uint16_t failed = 0;

	for (unsigned int i = 0; i < d->round_size_count; i++)
		if (!(d->round_arrived & (1u << i)) &&
		    d->round_sizes[i] > d->round_mtu &&
		    (failed == 0 || d->round_sizes[i] < failed))
			failed = d->round_sizes[i];
	if (d->round_method == NIC_PMTU_METHOD_FRAGMENTS &&
	    (failed == 0 || d->round_mtu + 8 < failed))
		failed = (uint16_t)(d->round_mtu + 8);
	if (d->refining && d->refine_hi != 0 &&
	    (failed == 0 || d->refine_hi < failed))
		failed = d->refine_hi;
	return failed;
}

/* Under the lock, as a round ends: when the operator asked for the exact
 * value and the round left a gap (what passed, what did not), the next
 * round probes eight sizes evenly inside it; true when one was begun. */
static bool refine(struct nic_pathmtu *pm, struct dest *d, uint64_t now_ns)
{
	uint16_t low = d->round_mtu, high = least_failed_size(d);
	unsigned int count;

	if (!d->exact_wanted || low == 0)
		return false;
	if (high == 0 || high - low <= 1) {
		d->exact = true;
		return false;
	}
	if (d->refine_rounds == NIC_PMTU_MAX_REFINE_ROUNDS)
		return false;
	count = RTE_MIN((unsigned int)(high - low - 1),
			(unsigned int)NIC_PMTU_MAX_PROBE_SIZES);
	for (unsigned int i = 0; i < count; i++)
		d->round_sizes[i] =
			(uint16_t)(low + (uint32_t)(high - low) * (i + 1) /
						 (count + 1));
	d->round_size_count = (uint8_t)count;
	d->round_arrived = 0;
	d->refine_hi = high;
	d->refining = true;
	d->refine_rounds++;
	d->copies_sent = 0;
	d->round_ns = now_ns;
	/* The new round keeps the nonce, the value learned so far (replies
	 * only raise it) and the first round's round trip. */
	COUNT(pm, refine_rounds);
	return true;
}

/* How long a round waits for answers. Once a reply has shown the round
 * trip, a round that the operator waits on (exact) ends a few round trips
 * after its second copy; others wait out the timeout, which costs nothing. */
static uint64_t round_wait_ns(const struct nic_pathmtu *pm,
			      const struct dest *d)
{
	const uint64_t timeout = pm->config.timeout_ms * PMTU_NS_PER_MS;
	uint64_t wait;

	if (!d->exact_wanted || d->rtt_ns == 0)
		return timeout;
	wait = pm->config.second_probe_ms * PMTU_NS_PER_MS +
	       REFINE_WAIT_RTTS * d->rtt_ns + REFINE_SLACK_NS;
	return RTE_MIN(wait, timeout);
}

static void end_round(struct nic_pathmtu *pm, struct dest *d, uint64_t now_ns)
{
	d->state = DEST_IDLE;
	d->refining = false;
	d->exact_wanted = false;
	if (d->round_mtu != 0) {
		COUNT(pm, rounds_answered);
	} else {
		/* Nothing came back: what an earlier round learned may no
		 * longer hold, so the configured value applies again. */
		COUNT(pm, rounds_unanswered);
		if (d->mtu != 0)
			set_mtu(pm, d, 0, NIC_PMTU_METHOD_NONE, now_ns);
	}
}

static void sweep(struct nic_pathmtu *pm, uint64_t now_ns)
{
	for (unsigned int i = 0; i < SWEEP_SLOTS; i++) {
		struct dest *d = &pm->slots[pm->sweep_cursor];

		pm->sweep_cursor = (pm->sweep_cursor + 1) & pm->mask;
		if (d->used && d->state != DEST_PROBING &&
		    now_ns - atomic_load_explicit(&d->used_ns,
						  memory_order_relaxed) >
			    expiry_ns(pm)) {
			COUNT(pm, destinations_expired);
			release(pm, d);
		}
	}
	for (unsigned int g = 0; g < FRAGMENT_GROUPS; g++) {
		struct fragment_group *group = &pm->groups[g];

		if (group->used &&
		    now_ns - group->first_ns > FRAGMENT_TIMEOUT_NS) {
			group->used = false;
			COUNT(pm, fragment_groups_expired);
		}
	}
}

uint16_t nic_pathmtu_poll(struct nic_pathmtu *pm, unsigned int port_index,
			  uint64_t now_ns, struct rte_mbuf **probes,
			  uint16_t cap)
{
	bool rounds =
		port_index < 32 &&
		(atomic_load_explicit(&pm->active_ports, memory_order_relaxed) &
		 (1u << port_index));
	bool sweeping = port_index == 0 && now_ns >= pm->next_sweep_ns;
	const uint64_t gap = pm->config.second_probe_ms * PMTU_NS_PER_MS;
	unsigned int still_active = 0;
	uint16_t count = 0;

	if (!rounds && !sweeping)
		return 0;
	rte_spinlock_lock(&pm->lock);
	if (sweeping) {
		pm->next_sweep_ns = now_ns + SWEEP_INTERVAL_NS;
		sweep(pm, now_ns);
	}
	for (unsigned int i = 0; i < pm->requested_count;) {
		struct dest *d = &pm->slots[pm->requested[i]];

		if (d->port_index != port_index ||
		    cap - count < nic_pathmtu_round_size(pm)) {
			i++;
			continue;
		}
		if (d->used && d->state != DEST_PROBING)
			count += start_round(pm, d, now_ns, probes + count,
					     (uint16_t)(cap - count));
		pm->requested[i] = pm->requested[--pm->requested_count];
	}
	for (unsigned int i = 0; rounds && i < pm->active_count;) {
		struct dest *d = &pm->slots[pm->active[i]];

		if (d->port_index != port_index) {
			i++;
			continue;
		}
		if (d->copies_sent < 2 && now_ns - d->round_ns >= gap &&
		    cap - count >= nic_pathmtu_round_size(pm))
			count += send_round(pm, d, probes + count,
					    (uint16_t)(cap - count));
		if (now_ns - d->round_ns >= round_wait_ns(pm, d)) {
			/* No room for a refinement's probes: the next poll. */
			bool refine_later =
				d->exact_wanted &&
				cap - count < nic_pathmtu_round_size(pm);

			if (refine_later || refine(pm, d, now_ns)) {
				if (!refine_later)
					count += send_round(
						pm, d, probes + count,
						(uint16_t)(cap - count));
				still_active++;
				i++;
				continue;
			}
			end_round(pm, d, now_ns);
			pm->active[i] = pm->active[--pm->active_count];
			continue;
		}
		still_active++;
		i++;
	}
	for (unsigned int i = 0; i < pm->requested_count; i++)
		still_active +=
			pm->slots[pm->requested[i]].port_index == port_index;
	if (rounds && still_active == 0)
		atomic_fetch_and(&pm->active_ports, ~(1u << port_index));
	rte_spinlock_unlock(&pm->lock);
	return count;
}

int nic_pathmtu_request_round(struct nic_pathmtu *pm, uint8_t ip_version,
			      const uint8_t *addr, bool exact)
{
	struct dest *d;
	int result = 0;

	rte_spinlock_lock(&pm->lock);
	d = find(pm, ip_version, addr, NULL);
	if (d == NULL)
		result = -ENOENT;
	else if (d->state == DEST_PROBING) {
		/* Its answer is the answer; made exact if asked. */
		d->exact_wanted |= exact;
		result = -EALREADY;
	} else if (pm->requested_count == MAX_REQUESTS)
		result = -EBUSY;
	else {
		d->exact_wanted = exact;
		pm->requested[pm->requested_count++] =
			(uint32_t)(d - pm->slots);
		/* Wakes the poll of its port. */
		atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	}
	rte_spinlock_unlock(&pm->lock);
	return result;
}

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
	d = find(pm, ip_version, addr, NULL);
	if (d != NULL)
		view_of(d, now_ns, view);
	rte_spinlock_unlock(&pm->lock);
	return d != NULL;
}

/* A reply to one of our probes (message read, lock not held). */
static void take_reply(struct nic_pathmtu *pm, const struct rte_mbuf *m,
		       const struct parsed *p,
		       const struct pmtu_message *message, uint16_t udp_len,
		       uint64_t now_ns)
{
	uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
	uint16_t probe_size = rte_be_to_cpu_16(message->probe_size);
	uint16_t candidate = 0;
	struct dest *d;

	if (message->count == 0 || message->count > NIC_PMTU_MAX_FRAGMENTS ||
	    udp_len > p->l4_len ||
	    udp_len < sizeof(struct rte_udp_hdr) + MESSAGE_LEN +
			      2u * message->count ||
	    (message->kind != NIC_PMTU_METHOD_FRAGMENTS &&
	     message->kind != NIC_PMTU_METHOD_SIZES) ||
	    probe_size < MIN_REPORTED_SIZE || probe_size > MAX_PROBE_SIZE ||
	    (message->kind == NIC_PMTU_METHOD_SIZES && message->count != 1)) {
		COUNT(pm, replies_malformed);
		return;
	}
	for (uint8_t i = 0; i < message->count; i++) {
		rte_be16_t size;

		memcpy(&size,
		       rte_pktmbuf_mtod_offset(
			       m, void *,
			       p->l4_offset + sizeof(struct rte_udp_hdr) +
				       MESSAGE_LEN + 2u * i),
		       2);
		sizes[i] = rte_be_to_cpu_16(size);
		/* A path cannot deliver more than was sent, nor a sized
		 * probe in another size than its own. */
		if (sizes[i] < MIN_REPORTED_SIZE || sizes[i] > probe_size ||
		    (message->kind == NIC_PMTU_METHOD_SIZES &&
		     sizes[i] != probe_size)) {
			COUNT(pm, replies_malformed);
			return;
		}
		candidate = RTE_MAX(candidate, sizes[i]);
	}
	/* A DF-clear probe that arrived whole proves nothing: a box that
	 * reassembles on the way (a firewall, a NAT, even the responder's
	 * own capture socket) hides the fragmentation that happened before
	 * it. Only real fragments count; the sized probes decide the rest. */
	if (message->kind == NIC_PMTU_METHOD_FRAGMENTS && message->count == 1)
		candidate = 0;
	/* Below the least MTU IP allows, a claim is broken or hostile. */
	if (candidate != 0 && candidate < (p->version == 4 ? 576 : 1280)) {
		COUNT(pm, replies_malformed);
		return;
	}
	rte_spinlock_lock(&pm->lock);
	d = find(pm, p->version, p->src, NULL);
	if (d == NULL || d->round_ns == 0 ||
	    memcmp(d->nonce, message->nonce, sizeof(d->nonce)) != 0 ||
	    probe_size > pm->config.probe_mtu) {
		rte_spinlock_unlock(&pm->lock);
		COUNT(pm, replies_forged);
		return;
	}
	COUNT(pm, replies_accepted);
	if (d->rtt_ns == 0)
		d->rtt_ns = now_ns - d->round_ns;
	if (message->kind == NIC_PMTU_METHOD_SIZES)
		for (unsigned int i = 0; i < d->round_size_count; i++)
			if (d->round_sizes[i] == probe_size)
				d->round_arrived |= (uint8_t)(1u << i);
	if (candidate > d->round_mtu) {
		/* The first answer of a round replaces what an earlier round
		 * learned (the path may have shrunk); later ones only raise. */
		d->round_mtu = candidate;
		d->round_method = message->kind;
		set_mtu(pm, d, candidate, message->kind, now_ns);
	}
	rte_spinlock_unlock(&pm->lock);
}

/* ------------------------------------------------------------------ */
/* The responder                                                        */

static void swap_l2(uint8_t *l2)
{
	uint8_t mac[RTE_ETHER_ADDR_LEN];

	memcpy(mac, l2, RTE_ETHER_ADDR_LEN);
	memcpy(l2, l2 + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
	memcpy(l2 + RTE_ETHER_ADDR_LEN, mac, RTE_ETHER_ADDR_LEN);
}

/* Under the lock: a reply listing sizes, if the budget and the
 * amplification rule (never more bytes than the probe) allow it. */
static struct rte_mbuf *answer(struct nic_pathmtu *pm, const uint8_t *probe_l2,
			       uint8_t l2_len, const struct parsed *p,
			       const struct pmtu_message *probe,
			       const uint16_t *sizes, uint8_t count,
			       uint32_t probe_bytes, uint64_t now_ns)
{
	uint32_t l3_len = p->version == 4 ? sizeof(struct rte_ipv4_hdr)
					  : sizeof(struct rte_ipv6_hdr);
	uint32_t reply_len =
		l3_len + sizeof(struct rte_udp_hdr) + MESSAGE_LEN + 2u * count;
	struct pmtu_message message = *probe;
	uint8_t l2[MAX_L2_LEN];
	struct rte_mbuf *reply;

	if (reply_len > probe_bytes) {
		COUNT(pm, probes_malformed);
		return NULL;
	}
	if (!take_token(&pm->reply_budget, now_ns)) {
		COUNT(pm, replies_rate_limited);
		return NULL;
	}
	memcpy(l2, probe_l2, l2_len);
	swap_l2(l2);
	message.type = TYPE_REPLY;
	message.count = count;
	reply = build(pm, l2, l2_len, p->version, p->dst, p->src, reply_len,
		      false, &message, sizes, count);
	if (reply)
		COUNT(pm, probes_answered);
	return reply;
}

static bool probe_is_valid(const struct pmtu_message *message,
			   const struct parsed *p, uint16_t udp_len, bool whole)
{
	uint16_t probe_size = rte_be_to_cpu_16(message->probe_size);

	if (message->version != PMTU_VERSION || message->count != 0 ||
	    probe_size < MIN_REPORTED_SIZE || probe_size > MAX_PROBE_SIZE ||
	    udp_len < sizeof(struct rte_udp_hdr) + MESSAGE_LEN)
		return false;
	if (message->kind == NIC_PMTU_METHOD_SIZES)
		/* Sized probes travel whole, in the size they name. */
		return whole && p->ip_len == probe_size && udp_len == p->l4_len;
	if (message->kind != NIC_PMTU_METHOD_FRAGMENTS)
		return false;
	/* The datagram must fill the probe it names. */
	return (uint32_t)udp_len + p->l3_len == probe_size &&
	       (!whole || udp_len == p->l4_len);
}

static struct fragment_group *
find_group(struct nic_pathmtu *pm, const struct parsed *p, uint64_t now_ns)
{
	struct fragment_group *oldest = NULL, *unused = NULL;
	uint32_t src, dst;

	memcpy(&src, p->src, 4);
	memcpy(&dst, p->dst, 4);
	for (unsigned int g = 0; g < FRAGMENT_GROUPS; g++) {
		struct fragment_group *group = &pm->groups[g];

		if (!group->used) {
			if (unused == NULL)
				unused = group;
			continue;
		}
		if (group->id == p->ip_id && group->src == src &&
		    group->dst == dst)
			return group;
		if (oldest == NULL || group->first_ns < oldest->first_ns)
			oldest = group;
	}
	if (unused == NULL) {
		COUNT(pm, fragment_groups_evicted);
		unused = oldest;
	}
	memset(unused, 0, sizeof(*unused));
	unused->used = true;
	unused->id = p->ip_id;
	unused->src = src;
	unused->dst = dst;
	unused->first_ns = now_ns;
	unused->end = -1;
	return unused;
}

/* The group's fragment sizes in the order of their offsets. */
static void sizes_in_order(const struct fragment_group *group, uint16_t *sizes)
{
	uint16_t offsets[NIC_PMTU_MAX_FRAGMENTS];

	for (uint8_t i = 0; i < group->count; i++) {
		uint8_t j = i;

		while (j > 0 && offsets[j - 1] > group->offsets[i]) {
			offsets[j] = offsets[j - 1];
			sizes[j] = sizes[j - 1];
			j--;
		}
		offsets[j] = group->offsets[i];
		sizes[j] = group->sizes[i];
	}
}

/* A fragment (lock not held). Returns true when consumed. */
static bool take_fragment(struct nic_pathmtu *pm, struct rte_mbuf *m,
			  const struct parsed *p, uint64_t now_ns,
			  struct rte_mbuf **replies, uint16_t *reply_count)
{
	struct pmtu_message message;
	uint16_t udp_len = 0;
	bool ours_first = false, consumed = false;
	struct fragment_group *group;

	COUNT(pm, fragments_seen);
	if (p->fragment_offset == 0) {
		enum message_read read =
			read_message(pm, m, p, &message, &udp_len);

		if (read == NOT_OURS) {
			COUNT(pm, fragments_passed);
			return false; /* someone else's datagram */
		}
		if (read == OURS_MALFORMED || message.type != TYPE_PROBE ||
		    !probe_is_valid(&message, p, udp_len, false)) {
			COUNT(pm, probes_malformed);
			rte_pktmbuf_free(m);
			return true;
		}
		ours_first = true;
	}
	rte_spinlock_lock(&pm->lock);
	group = find_group(pm, p, now_ns);
	for (uint8_t i = 0; i < group->count; i++)
		if (group->offsets[i] == p->fragment_offset)
			goto done; /* a duplicate adds nothing */
	if (group->count == NIC_PMTU_MAX_FRAGMENTS) {
		group->used = false;
		goto done;
	}
	group->offsets[group->count] = (uint16_t)p->fragment_offset;
	group->sizes[group->count] = (uint16_t)p->ip_len;
	group->count++;
	group->covered += p->l4_len;
	group->probe_bytes += p->ip_len;
	if (!p->more_fragments)
		group->end = (int32_t)(p->fragment_offset + p->l4_len);
	if (ours_first) {
		group->first_seen = true;
		group->is_probe = true;
		group->message = message;
		group->l2_len = (uint8_t)RTE_MIN(p->l2_len, MAX_L2_LEN);
		memcpy(group->l2, rte_pktmbuf_mtod(m, const uint8_t *),
		       group->l2_len);
	}
done:
	if (group->used && group->is_probe) {
		consumed = true;
		if (group->end >= 0 && group->covered == (uint32_t)group->end) {
			uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
			struct parsed first = *p;
			uint32_t dst = group->dst, src = group->src;

			sizes_in_order(group, sizes);
			memcpy(first.src, &src, 4);
			memcpy(first.dst, &dst, 4);
			replies[*reply_count] =
				answer(pm, group->l2, group->l2_len, &first,
				       &group->message, sizes, group->count,
				       group->probe_bytes, now_ns);
			if (replies[*reply_count])
				(*reply_count)++;
			group->used = false;
		}
	}
	rte_spinlock_unlock(&pm->lock);
	if (consumed)
		rte_pktmbuf_free(m);
	else
		COUNT(pm, fragments_passed);
	return consumed;
}

/* An ICMP "fragmentation needed" (IPv4) or "packet too big" (IPv6): the
 * path to the destination of the packet it quotes changed. */
static void take_icmp_error(struct nic_pathmtu *pm, const struct rte_mbuf *m,
			    const struct parsed *p, uint64_t now_ns)
{
	uint8_t header[2], quoted[40];
	uint32_t quoted_dst, quoted_len = p->version == 4 ? 20 : 40;
	struct dest *d;

	if (p->l4_len < 8 + quoted_len)
		return;
	memcpy(header, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset), 2);
	if (p->version == 4 ? !(header[0] == 3 && header[1] == 4)
			    : header[0] != 2)
		return;
	memcpy(quoted, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + 8),
	       quoted_len);
	if ((quoted[0] >> 4) != p->version)
		return;
	quoted_dst = p->version == 4 ? 16 : 24;
	rte_spinlock_lock(&pm->lock);
	d = find(pm, p->version, quoted + quoted_dst, NULL);
	if (d != NULL) {
		/* A round under way or just over already answers it. */
		if (d->state == DEST_PROBING ||
		    (d->round_ns != 0 &&
		     now_ns - d->round_ns <
			     pm->config.icmp_gap_s * PMTU_NS_PER_S)) {
			COUNT(pm, icmp_ignored);
		} else if (pm->requested_count < MAX_REQUESTS) {
			pm->requested[pm->requested_count++] =
				(uint32_t)(d - pm->slots);
			atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
			COUNT(pm, icmp_reprobes);
		}
	}
	rte_spinlock_unlock(&pm->lock);
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
	if (!parse(m, &p))
		return false;
	if (p.fragment)
		return p.version == 4 &&
		       take_fragment(pm, m, &p, now_ns, replies, reply_count);
	if (p.protocol == IPPROTO_ICMP || p.protocol == IPPROTO_ICMPV6) {
		take_icmp_error(pm, m, &p, now_ns);
		return false;
	}
	switch (read_message(pm, m, &p, &message, &udp_len)) {
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
		take_reply(pm, m, &p, &message, udp_len, now_ns);
	} else if (message.type == TYPE_PROBE &&
		   probe_is_valid(&message, &p, udp_len, true)) {
		uint16_t size = (uint16_t)p.ip_len;

		rte_spinlock_lock(&pm->lock);
		replies[0] = answer(pm, rte_pktmbuf_mtod(m, const uint8_t *),
				    (uint8_t)RTE_MIN(p.l2_len, MAX_L2_LEN), &p,
				    &message, &size, 1, p.ip_len, now_ns);
		rte_spinlock_unlock(&pm->lock);
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
/* The operator's view                                                  */

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
