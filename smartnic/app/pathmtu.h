/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path MTU discovery between borders (F-PMTUD, docs/pathmtu.md).
 *
 * The prober: the first outbound packet to an external destination that
 * the rack caused (a SYN it sends, or data) starts a probe round to it:
 * a destination no responder has answered yet gets a "hello", one small
 * probe no larger than what an outsider sends to cause it, and the whole
 * set only once that is answered (docs/pathmtu.md, Security). IPv4 gets a probe
 * of the next hop's MTU with DF clear, which routers on the way fragment (the
 * largest fragment that arrives is the path MTU), and both versions get "sized"
 * probes of several lengths that may not be fragmented (IPv6 routers never
 * fragment, and some IPv4 paths drop fragments): the largest that arrives
 * bounds the path MTU from below. The whole set goes out twice, a few ms
 * apart. A reply counts only if it comes from the probed destination and
 * echoes the round's random nonce; each accepted reply can only raise the
 * path MTU of the round, so it is usable after one round trip.
 *
 * The responder: answers each probe (whole, or its fragments once all
 * arrived) with the IP lengths that arrived and the probe's nonce, in a
 * reply never larger than the probe, at a bounded rate.
 *
 * The data path asks nic_pathmtu_learned() for every packet it splits,
 * from every worker at once: a counting Bloom filter of the destinations
 * with a learned MTU answers "nothing learned" with one test, and table
 * slots are read under a sequence lock, so readers never take the lock
 * writers share. Every table is bounded; what does not fit is evicted and
 * counted.
 */
#ifndef JUMBOGATE_NIC_PATHMTU_H
#define JUMBOGATE_NIC_PATHMTU_H

#include <stdbool.h>
#include <stdint.h>

#include <jumbogate/engine.h>

struct rte_mbuf;
struct rte_mempool;

#define NIC_PMTU_DEFAULT_PORT	  48999
#define NIC_PMTU_DEFAULT_CAPACITY 4096
#define NIC_PMTU_MAX_PROBE_SIZES  8
/* An exact value narrows [passed, failed) to a ninth per round (eight
 * sizes in between): 4000..8000 takes four rounds; six is a bound, not a
 * need. */
#define NIC_PMTU_MAX_REFINE_ROUNDS 6
/* Most fragments a probe may arrive in (9216 / 576 is 16). */
#define NIC_PMTU_MAX_FRAGMENTS 32

struct nic_pmtu_config {
	uint16_t port;	     /* UDP port of probes and replies */
	uint16_t probe_mtu;  /* largest probe: the next hop's MTU */
	uint32_t capacity;   /* destinations tracked */
	uint32_t reprobe_s;  /* a learned path is probed again after this */
	uint32_t timeout_ms; /* a round without an answer by then has none */
	uint32_t second_probe_ms; /* gap before the second copy */
	/* Responder budget per source prefix (/24, /48) of probes, burst a
	 * second's; REPLY_PREFIXES_AT_FULL_RATE times that in all. */
	uint32_t replies_per_s;
	uint32_t rounds_per_s; /* prober budget of new rounds */
	/* Rounds begun toward one destination prefix (/24, /48) per minute
	 * (burst: a minute's), so no outsider can aim the prober's budget
	 * at one network. The operator's requests are not counted. */
	uint32_t prefix_rounds_per_min;
	/* An ICMP "too big" about a path asks for a new round only this long
	 * after the last one: a forged error must not make the border probe
	 * over and over. */
	uint32_t icmp_gap_s;
};

void nic_pathmtu_config_init(struct nic_pmtu_config *config);

/* How a path MTU was found; names in nic_pathmtu_method_name. */
enum nic_pmtu_method {
	NIC_PMTU_METHOD_NONE = 0,  /* probing, or no answer: fallback */
	NIC_PMTU_METHOD_FRAGMENTS, /* largest fragment of a DF-clear probe */
	NIC_PMTU_METHOD_SIZES,	   /* largest sized probe that arrived */
};

const char *nic_pathmtu_method_name(enum nic_pmtu_method method);

#define NIC_PMTU_COUNTERS(X)                                                   \
	X(rounds_started)                                                      \
	X(rounds_suppressed)	 /* new rounds over rounds_per_s */            \
	X(rounds_prefix_limited) /* over prefix_rounds_per_min */              \
	X(hello_rounds)		 /* rounds of one small probe */               \
	X(hellos_answered)	 /* destinations a responder answered for */   \
	X(outbound_ignored) /* SYN-ACKs, RSTs, bare ACKs: start no round */    \
	X(rounds_answered)                                                     \
	X(rounds_unanswered)                                                   \
	X(probes_sent)                                                         \
	X(probe_bytes) /* IP bytes of the probes sent */                       \
	X(replies_accepted)                                                    \
	X(replies_forged) /* wrong nonce, or no round to that address */       \
	X(replies_malformed)                                                   \
	X(replies_late) /* for a round already over */                         \
	X(probes_answered)                                                     \
	X(probes_malformed)                                                    \
	X(replies_rate_limited) /* over the source prefix's budget */          \
	X(replies_global_limited)                                              \
	X(fragments_seen)                                                      \
	X(fragments_passed) /* not (yet) known to be a probe's */              \
	X(fragment_groups_evicted)                                             \
	X(fragment_groups_expired)                                             \
	X(fragment_groups_conflicting) /* overlaps, holes, wrong ends */       \
	X(fragments_unplaced) /* no way free of probes in the bucket */        \
	X(destinations_evicted)                                                \
	X(destinations_expired)                                                \
	X(icmp_reprobes) /* rounds an ICMP "too big" about a path asked for */ \
	X(icmp_ignored)	 /* such errors within icmp_gap_s of a round */        \
	X(icmp_unmatched) /* quoting nothing the border sent */                \
	X(refine_rounds)  /* rounds narrowing a value the operator wants exact \
			   */                                                  \
	X(buffers_exhausted)

struct nic_pmtu_stats {
#define NIC_PMTU_FIELD(name) uint64_t name;
	NIC_PMTU_COUNTERS(NIC_PMTU_FIELD)
#undef NIC_PMTU_FIELD
	uint64_t destinations_now;
	uint64_t learned_now;
};

/* One destination as the operator sees it. */
struct nic_pmtu_view {
	uint8_t ip_version;
	uint8_t addr[16];
	uint16_t mtu; /* 0: none learned (the configured value applies) */
	enum nic_pmtu_method method;
	bool exact; /* refined to the byte (ProbePath with exact) */
	bool probing;
	double age_s;	   /* since it was learned, or since the round began */
	double rtt_ms;	   /* of the first accepted reply; 0 if none */
	uint64_t round_ns; /* when the last round began (nic_now_ns) */
};

struct nic_pathmtu;

/* NULL with rte_errno set when memory is short. */
struct nic_pathmtu *nic_pathmtu_create(const struct nic_pmtu_config *config,
				       struct rte_mempool *pool);
void nic_pathmtu_free(struct nic_pathmtu *pm);

/* The engine's learned_path_mtu: lock-free, any lcore. */
uint16_t nic_pathmtu_learned(const void *pm, uint8_t ip_version,
			     const uint8_t *dst);

/* Whether a received packet may be a probe, a reply, a probe's fragment
 * or an ICMP error about a path, and must go to nic_pathmtu_receive: a
 * few compares. */
bool nic_pathmtu_wants(const struct nic_pathmtu *pm,
		       const struct jg_packet_summary *packet);

/* Take a packet nic_pathmtu_wants. Returns true when it was ours and is
 * consumed (freed); false when it must travel on unchanged (an ICMP
 * "fragmentation needed" or "packet too big" about a tracked destination
 * travels on, and asks for a new round to it). Replies to
 * send back out of the port it came in on are stored in replies (at most
 * one). */
bool nic_pathmtu_receive(struct nic_pathmtu *pm, struct rte_mbuf *m,
			 uint64_t now_ns, struct rte_mbuf **replies,
			 uint16_t *reply_count);

/* An outbound packet (which stays the caller's) to an external
 * destination: starts a round to a destination not seen before or due
 * again. Probes to send out of the packet's transmit port are stored in
 * probes (cap at least nic_pathmtu_round_size()); returns how many. */
uint16_t nic_pathmtu_note_outbound(struct nic_pathmtu *pm,
				   const struct rte_mbuf *m,
				   const struct jg_packet_summary *packet,
				   unsigned int port_index, uint64_t now_ns,
				   struct rte_mbuf **probes, uint16_t cap);

/* Most probes one copy of a round sends. */
uint16_t nic_pathmtu_round_size(const struct nic_pathmtu *pm);

/* Timers: second copies and ends of rounds of destinations first seen on
 * port_index, and (port_index 0) expiry. Cheap until something is due. */
uint16_t nic_pathmtu_poll(struct nic_pathmtu *pm, unsigned int port_index,
			  uint64_t now_ns, struct rte_mbuf **probes,
			  uint16_t cap);

/* A round to a destination already seen, now (by the next poll of its
 * port): 0, -ENOENT (never seen: nothing says how to reach it),
 * -EALREADY (a round is under way) or -EBUSY (too many requests). With
 * exact, rounds of sizes between what passed and what did not follow
 * until the value is exact to the byte (at most NIC_PMTU_MAX_REFINE_ROUNDS,
 * each a few round trips long); the destination is probing until then. */
int nic_pathmtu_request_round(struct nic_pathmtu *pm, uint8_t ip_version,
			      const uint8_t *addr, bool exact);

/* One destination; false when it is not tracked. */
bool nic_pathmtu_view(struct nic_pathmtu *pm, uint8_t ip_version,
		      const uint8_t *addr, uint64_t now_ns,
		      struct nic_pmtu_view *view);

void nic_pathmtu_get_stats(const struct nic_pathmtu *pm,
			   struct nic_pmtu_stats *stats);

/* Up to cap destinations; returns how many were written. */
unsigned int nic_pathmtu_list(struct nic_pathmtu *pm, uint64_t now_ns,
			      struct nic_pmtu_view *views, unsigned int cap);

#endif /* JUMBOGATE_NIC_PATHMTU_H */
