/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path MTU discovery's parts and what they share: the destination table
 * (pathmtu_table.c), packets on the wire (pathmtu_wire.c), the prober
 * (pathmtu_prober.c), the responder (pathmtu_responder.c), and the entry
 * points and operator's view (pathmtu.c). Not for use outside them.
 */
#ifndef JUMBOGATE_NIC_PATHMTU_INTERNAL_H
#define JUMBOGATE_NIC_PATHMTU_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_spinlock.h>

#include "pathmtu.h"

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
/* Fragment groups: 256, in buckets of four ways, each bucket under its
 * own lock, so that a fragment costs one bucket whatever the load. */
#define FRAGMENT_BUCKETS 64
#define FRAGMENT_WAYS	 4
/* Budgets by prefix (/24, /48): cells of a keyed hash of the prefix.
 * Prefixes that share a cell share its budget; which ones do is secret. */
#define PREFIX_CELLS 1024
/* The responder's global budget is this many prefixes' worth. */
#define REPLY_PREFIXES_AT_FULL_RATE 8
/* A hello: one sized probe of the least size a responder answers (its
 * reply, 50 or 70 bytes, must not be larger). */
#define HELLO_SIZE_V4 MIN_REPORTED_SIZE
#define HELLO_SIZE_V6 70u
/* A hello without an answer is tried again after this, doubling up to
 * the reprobe interval. */
#define HELLO_RETRY_NS (10ull * 1000 * 1000 * 1000)
/* An ICMP error quoting a TCP segment matches what the border sent when
 * the quoted sequence number lies at most this far behind the end of the
 * last segment it sent to that destination on those ports: an off-path
 * forger guesses right once in 2^32 / 2^21 = 2048 tries. */
#define ICMP_SEQ_WINDOW (2u << 20)
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
	/* The last TCP segment with data sent to it: its ports as on the
	 * wire (high 32 bits) and the sequence number after it, which an
	 * ICMP error's quote must match (take_icmp_error). */
	_Atomic uint64_t last_sent;
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
	bool confirmed;	     /* answered a probe: a responder is there */
	bool hello;	     /* this round is one small probe (not confirmed) */
	bool operator_round; /* the operator asked for the next round */
	uint8_t hello_failures; /* hellos in a row without an answer */
	bool replied;		/* a reply of this round was accepted */
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
	bool is_probe; /* its first fragment came and is a probe's */
	uint8_t count;
	uint16_t id;
	uint32_t src, dst;
	uint64_t first_ns;
	uint32_t covered; /* data bytes; fragments never overlap */
	int32_t end;	  /* -1 until the last fragment came */
	uint32_t udp_len; /* from the first fragment's UDP header */
	uint32_t probe_bytes;
	uint16_t offsets[NIC_PMTU_MAX_FRAGMENTS];
	uint16_t lengths[NIC_PMTU_MAX_FRAGMENTS]; /* data bytes */
	uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];	  /* IP lengths */
	struct pmtu_message message;
	uint8_t l2_len;
	uint8_t l2[MAX_L2_LEN];
};

struct fragment_bucket {
	rte_spinlock_t lock;
	struct fragment_group ways[FRAGMENT_WAYS];
} __rte_cache_aligned;

struct token_bucket {
	double tokens;
	double per_s;
	double burst;
	uint64_t last_ns;
};

/* Which keyed hash: each its own key, so that addresses sharing a slot
 * do not therefore share a Bloom counter, a budget or a group bucket. */
enum pmtu_hash {
	HASH_SLOT,
	HASH_BLOOM_A,
	HASH_BLOOM_B,
	HASH_PREFIX,
	HASH_FRAGMENT,
	HASH_COUNT,
};
#define HASH_KEY_WORDS 6 /* an IPv6 address and its version */

struct nic_pathmtu {
	struct nic_pmtu_config config;
	struct rte_mempool *pool;
	rte_be16_t port_be;
	uint32_t mask;
	uint32_t bloom_mask;
	uint32_t hash_key[HASH_COUNT][HASH_KEY_WORDS];
	rte_spinlock_t lock; /* the destination table's writers, rounds */
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
	struct fragment_bucket groups[FRAGMENT_BUCKETS];
	/* Under lock: rounds begun, in all and toward each destination
	 * prefix. */
	struct token_bucket round_budget;
	struct token_bucket prefix_rounds[PREFIX_CELLS];
	/* Replies, in all and to each source prefix of probes. */
	rte_spinlock_t reply_lock;
	struct token_bucket reply_budget;
	struct token_bucket prefix_replies[PREFIX_CELLS];
	uint64_t destinations_now;
	uint64_t learned_now;
	struct nic_pmtu_stats stats; /* counters: atomic adds */
};

#define COUNT(pm, field)                                                       \
	__atomic_add_fetch(&(pm)->stats.field, 1, __ATOMIC_RELAXED)
#define COUNT_N(pm, field, n)                                                  \
	__atomic_add_fetch(&(pm)->stats.field, (n), __ATOMIC_RELAXED)

unsigned int pmtu_address_len(uint8_t version);
/* Nonces and hash keys from the kernel's generator. */
void pmtu_secure_random(void *out, size_t len);
bool pmtu_take_token(struct token_bucket *bucket, uint64_t now_ns);
void pmtu_budget_init(struct token_bucket *bucket, double per_s, double burst);

/* Keyed hashes (pathmtu_table.c). */
uint64_t pmtu_hash_address(const struct nic_pathmtu *pm, enum pmtu_hash which,
			   uint8_t version, const uint8_t *addr);
/* The budget cell of an address's /24 (IPv4) or /48 (IPv6). */
struct token_bucket *pmtu_prefix_cell(const struct nic_pathmtu *pm,
				      struct token_bucket *cells,
				      uint8_t version, const uint8_t *addr);

/* The destination table (pathmtu_table.c). */
struct dest *pmtu_find(struct nic_pathmtu *pm, uint8_t version,
		       const uint8_t *addr, uint16_t *mtu);
void pmtu_set_mtu(struct nic_pathmtu *pm, struct dest *d, uint16_t mtu,
		  uint8_t method, uint64_t now_ns);
void pmtu_release(struct nic_pathmtu *pm, struct dest *d);
uint64_t pmtu_expiry_ns(const struct nic_pathmtu *pm);
struct dest *pmtu_insert(struct nic_pathmtu *pm, uint8_t version,
			 const uint8_t *addr, uint64_t now_ns);

/* Packets (pathmtu_wire.c). */
enum message_read { NOT_OURS, OURS, OURS_MALFORMED };

/* The headers of a packet; with whole, the whole IP packet is in the
 * first segment too (what reads its payload needs that). */
bool pmtu_parse(const struct rte_mbuf *m, struct parsed *p, bool whole);
enum message_read pmtu_read_message(const struct nic_pathmtu *pm,
				    const struct rte_mbuf *m,
				    const struct parsed *p,
				    struct pmtu_message *message,
				    uint16_t *udp_len);
struct rte_mbuf *pmtu_build(struct nic_pathmtu *pm, const uint8_t *l2,
			    uint8_t l2_len, uint8_t version, const uint8_t *src,
			    const uint8_t *dst, uint32_t ip_len,
			    bool dont_fragment,
			    const struct pmtu_message *message,
			    const uint16_t *sizes, uint8_t count);
/* The IP length of a hello (a probe of the least size answered). */
unsigned int pmtu_hello_size(uint8_t version);

/* The prober (pathmtu_prober.c). */
void pmtu_take_reply(struct nic_pathmtu *pm, const struct rte_mbuf *m,
		     const struct parsed *p, const struct pmtu_message *message,
		     uint16_t udp_len, uint64_t now_ns);
void pmtu_take_icmp_error(struct nic_pathmtu *pm, const struct rte_mbuf *m,
			  const struct parsed *p, uint64_t now_ns);

/* The responder (pathmtu_responder.c). */
struct rte_mbuf *pmtu_answer(struct nic_pathmtu *pm, const uint8_t *probe_l2,
			     uint8_t l2_len, const struct parsed *p,
			     const struct pmtu_message *probe,
			     const uint16_t *sizes, uint8_t count,
			     uint32_t probe_bytes, uint64_t now_ns);
bool pmtu_probe_is_valid(const struct pmtu_message *message,
			 const struct parsed *p, uint16_t udp_len, bool whole);
bool pmtu_take_fragment(struct nic_pathmtu *pm, struct rte_mbuf *m,
			const struct parsed *p, uint64_t now_ns,
			struct rte_mbuf **replies, uint16_t *reply_count);
void pmtu_expire_groups(struct nic_pathmtu *pm, uint64_t now_ns);

#endif /* JUMBOGATE_NIC_PATHMTU_INTERNAL_H */
