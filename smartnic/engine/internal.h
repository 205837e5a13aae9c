/* SPDX-License-Identifier: Apache-2.0 */
/* Definitions shared by the engine's sources; not part of the public API. */
#ifndef JUMBOGATE_INTERNAL_H
#define JUMBOGATE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "jumbogate/engine.h"

#define JG_TCP_FLAG_FIN 0x01
#define JG_TCP_FLAG_SYN 0x02
#define JG_TCP_FLAG_RST 0x04
#define JG_TCP_FLAG_PSH 0x08
#define JG_TCP_FLAG_ACK 0x10
#define JG_TCP_FLAG_URG 0x20
#define JG_TCP_FLAG_ECE 0x40
#define JG_TCP_FLAG_CWR 0x80

/* The largest MSS a legacy (Ethernet-sized) endpoint advertises. */
#define JG_LEGACY_MSS 1460u

/* ------------------------------------------------------------------ */
/* Packet parsing (packet.c)                                           */

/* Where the headers of a packet are and what they say. Only packets whose
 * headers all lie in the first mbuf segment are parsed; the engine passes
 * others through untouched. */
struct jg_parsed {
	uint16_t l2_len;     /* Ethernet + up to two VLAN tags */
	uint16_t l3_len;     /* IPv4 header with options / IPv6 + extensions */
	uint16_t l4_len;     /* TCP header with options, or 8 for UDP */
	uint8_t ip_version;  /* 4 or 6 */
	uint8_t l4_protocol; /* IPPROTO_TCP, IPPROTO_UDP or other */
	uint8_t tcp_flags;
	bool ipv4_has_options;
	bool is_fragment; /* IPv4 MF/offset, or IPv6 fragment header */
	/* A first fragment: the L4 ports are there, though the rest of the
	 * L4 header may not be. Lets the flow's held data leave first. */
	bool fragment_shows_ports;
	/* IPv6 routing header: the pseudo-header would need the final
	 * destination, so such packets are never rebuilt. */
	bool ipv6_routing;
	bool l4_complete;	 /* the L4 header was fully parsed */
	uint32_t ip_length;	 /* IP header + payload, from the IP header */
	uint32_t payload_length; /* bytes after the L4 header */
};

/* Header lengths of what nearly all TCP is, which the parse and the join
 * rules each take a path of their own for: untagged Ethernet, IPv4
 * without options or IPv6 without extension headers, TCP without options
 * or with timestamps (padded to 12 bytes, as Linux sends them). */
#define JG_PLAIN_L2_LEN	      14u
#define JG_PLAIN_IPV4_LEN     20u
#define JG_PLAIN_IPV6_LEN     40u
#define JG_PLAIN_TCP_LEN      20u
#define JG_TCP_TIMESTAMPS_LEN 32u

/* Parse Ethernet/VLAN/IP/(TCP|UDP). Returns false when the packet is not
 * IPv4/IPv6 or is inconsistent (lengths beyond the frame, truncated
 * headers); such packets are never transformed. */
bool jg_parse(const struct rte_mbuf *m, struct jg_parsed *parsed);
/* The same parse without jg_parse's path for plain TCP over IPv4 and
 * IPv6: the reference that path is tested against. */
bool jg_parse_general(const struct rte_mbuf *m, struct jg_parsed *parsed);

static inline uint16_t jg_header_length(const struct jg_parsed *p)
{
	return p->l2_len + p->l3_len + p->l4_len;
}

static inline void *jg_l3(const struct rte_mbuf *m, const struct jg_parsed *p)
{
	return rte_pktmbuf_mtod_offset(m, uint8_t *, p->l2_len);
}

static inline void *jg_l4(const struct rte_mbuf *m, const struct jg_parsed *p)
{
	return rte_pktmbuf_mtod_offset(m, uint8_t *, p->l2_len + p->l3_len);
}

/* Fill a flow key (merge direction) from a parsed TCP/UDP packet. */
void jg_flow_key_from_packet(const struct rte_mbuf *m,
			     const struct jg_parsed *p,
			     struct jg_flow_key *key);

/* The same flow seen from the other direction. */
void jg_flow_key_reverse(const struct jg_flow_key *key,
			 struct jg_flow_key *reversed);

/* MSS option of a SYN, 0 when absent. */
uint16_t jg_tcp_mss_option(const struct rte_tcp_hdr *th, uint16_t l4_len);

/* Offset of the MSS option's value from the start of the TCP header, 0
 * when there is none. */
uint16_t jg_tcp_mss_option_offset(const struct rte_tcp_hdr *th,
				  uint16_t l4_len);

/* Set the IP length field(s) for a new L4 payload length. */
void jg_set_ip_length(uint8_t *l3, const struct jg_parsed *p,
		      uint32_t payload_length);

/* Words at any alignment, in memory's byte order: the header comparisons
 * and the payload sum read frames a word at a time. */
static inline uint16_t jg_load16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t jg_load32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t jg_load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* ------------------------------------------------------------------ */
/* Ones' complement checksums (checksum.c)                             */

/* Fold a 32-bit accumulator of 16-bit words into 16 bits. */
static inline uint16_t jg_csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* a + b in ones' complement. */
static inline uint16_t jg_csum_add(uint16_t a, uint16_t b)
{
	return jg_csum_fold((uint32_t)a + b);
}

/* a - b in ones' complement. */
static inline uint16_t jg_csum_sub(uint16_t a, uint16_t b)
{
	return jg_csum_fold((uint32_t)a + (uint16_t)~b);
}

/* A sum of bytes that started at an odd offset, seen from an even one. */
static inline uint16_t jg_csum_swap(uint16_t sum)
{
	return (uint16_t)((sum << 8) | (sum >> 8));
}

/* The ones' complement sum of len bytes, not complemented: what
 * rte_raw_cksum returns for up to 128 KiB (checksum.c says why not past
 * it), several times faster on payloads. */
uint16_t jg_csum_raw(const void *buf, uint32_t len);

/* Raw sum of len bytes at offset off of a (possibly chained) packet. */
uint16_t jg_csum_mbuf_range(const struct rte_mbuf *m, uint32_t off,
			    uint32_t len);

/* Pseudo-header sum (addresses, protocol, L4 length) for an L4 checksum. */
uint16_t jg_csum_pseudo(const uint8_t *l3, const struct jg_parsed *p,
			uint32_t l4_length);

/* Raw sum of the L4 header with its checksum field taken as zero. */
uint16_t jg_csum_l4_header(const uint8_t *l4, uint16_t l4_len,
			   uint16_t checksum_offset);

/* Final L4 checksum from the pseudo-header, header and payload sums. */
static inline uint16_t jg_csum_finish(uint16_t pseudo, uint16_t header,
				      uint16_t payload)
{
	return (uint16_t)~jg_csum_add(jg_csum_add(pseudo, header), payload);
}

/* Whether the TCP/UDP checksum of a whole packet verifies; on success
 * *payload_sum is the raw sum of the L4 payload. */
bool jg_l4_checksum_verify(const struct rte_mbuf *m, const struct jg_parsed *p,
			   uint16_t *payload_sum);

/* Raw payload sum of a packet whose L4 checksum is known to be right,
 * derived from its headers without reading the payload. */
uint16_t jg_payload_sum_from_header(const struct rte_mbuf *m,
				    const struct jg_parsed *p);

/* Write IPv4 header checksum (software) or request it (offload). */
void jg_finish_ipv4_header(struct rte_mbuf *m, const struct jg_parsed *p,
			   enum jg_checksum_mode mode);

/* ------------------------------------------------------------------ */
/* Zero-copy mbuf helpers (mbuf_util.c)                                */

/* Cut a packet at byte offset: the packet keeps [0, offset) and the
 * returned chain holds [offset, pkt_len). The mbuf that straddles the cut
 * is shared through an indirect mbuf. NULL if no mbuf could be had. */
struct rte_mbuf *jg_mbuf_cut_tail(struct rte_mbuf *pkt, uint32_t offset,
				  struct rte_mempool *pool);

/* A chain of indirect mbufs that reference bytes [off, off + len) of a
 * packet without copying them. NULL if the pool ran dry. */
struct rte_mbuf *jg_mbuf_reference_range(struct rte_mbuf *pkt, uint32_t off,
					 uint32_t len,
					 struct rte_mempool *pool);

/* Append chain tail (with its own nb_segs/pkt_len) to chain head whose
 * last mbuf is head_last. Returns the new last mbuf. */
struct rte_mbuf *jg_mbuf_append_chain(struct rte_mbuf *head,
				      struct rte_mbuf *head_last,
				      struct rte_mbuf *tail);

/* Remove len bytes (headers) from the front of a packet. A first mbuf
 * left empty is freed; returns the packet's new first mbuf. */
struct rte_mbuf *jg_mbuf_strip_front(struct rte_mbuf *m, uint16_t len);

/* A new mbuf holding a copy of the first header_length bytes of m. */
struct rte_mbuf *jg_mbuf_copy_headers(const struct rte_mbuf *m,
				      uint16_t header_length,
				      struct rte_mempool *pool);

/* ------------------------------------------------------------------ */
/* Engine state                                                        */

/* Metadata of a held mbuf, kept in a registered mbuf dynamic field. Every
 * mbuf that starts an input segment records its arrival; the head mbuf of
 * a run also describes the run. */
struct jg_run_meta {
	struct rte_mbuf *next_run; /* next run of the flow, higher sequence */
	struct rte_mbuf *last;	   /* last mbuf of the run's chain */
	uint32_t seq;		   /* sequence number of first payload byte */
	uint32_t arrival_ns;	   /* low 32 bits of arrival time */
	uint16_t payload_sum;	   /* raw ones' complement payload sum */
	uint16_t segments;	   /* input segments that end in this run */
	uint16_t mss;		   /* payload of the run's full segments */
	uint8_t flags;		   /* JG_RUN_* */
	uint8_t segment_start;	   /* this mbuf begins an input segment */
};

_Static_assert(sizeof(struct jg_run_meta) <= JG_MBUF_PRIV_SIZE,
	       "run metadata must fit the private area callers reserve");

#define JG_RUN_CLOSED	0x01 /* nothing may be appended */
#define JG_RUN_ID_FIXED 0x02 /* IPv4 ID constant (DF set) */
#define JG_RUN_ID_INCR	0x04 /* IPv4 ID +1 per segment */
#define JG_RUN_MODIFIED 0x08 /* headers must be rewritten on emission */
/* Joined with a later run: segments behind the head may be older than it
 * (a late segment filled the hole in front of them). */
#define JG_RUN_JOINED 0x10
/* Begun by a segment that repeats data the flow saw (overlap restart): it
 * leaves with the call, as Linux holds such a segment only until its poll
 * ends. A retransmission of the newest segment is sent when the sender is
 * stalled waiting for an ACK; holding it for the delay model's wait would
 * hold up the receiver's ACK and the sender's recovery. */
#define JG_RUN_NO_WAIT 0x20

#define JG_INDEX_NONE UINT32_MAX

/* One flow-table entry. Its index is its slot: bucket * 8 + way. */
struct jg_flow {
	uint64_t fingerprint;  /* 64-bit hash of the full 5-tuple */
	struct rte_mbuf *runs; /* held runs, lowest sequence first */
	uint32_t timer_prev;   /* links in a timer slot or burst list */
	uint32_t timer_next;
	uint32_t deadline_ns; /* low 32 bits of the deadline */
	uint32_t rate_window_start_us;
	uint32_t rate_window_bytes;
	uint32_t rate_bytes_per_ms; /* smoothed arrival rate */
	uint16_t timer_list;	    /* JG_TIMER_* or wheel position */
	uint16_t mean_payload;	    /* smoothed segment payload */
	uint16_t yield_permille;    /* smoothed share of full packets */
	uint16_t internal_mss;	    /* advertised by the rack side, 0 unknown */
	uint16_t external_mss;	    /* advertised by the Internet side */
	uint16_t held_segments;
	uint8_t run_count;
	uint8_t flags;		   /* JG_FLOW_* */
	uint32_t last_seen_coarse; /* now >> JG_COARSE_SHIFT, for eviction */
	uint32_t released_end;	   /* sequence after the last byte released */
};

#define JG_FLOW_ONLOADED       0x01
#define JG_FLOW_OFFLOADED      0x02
#define JG_FLOW_RATE_VALID     0x04
#define JG_FLOW_RELEASED_VALID 0x08 /* released_end is set */

/* Coarse time for eviction and pin ageing: 65.5 us units, a lap of 78
 * hours. */
#define JG_COARSE_SHIFT 16

#define JG_TIMER_NONE  0xffff
#define JG_TIMER_BURST 0xfffe

#define JG_BUCKET_WAYS 8

struct jg_bucket {
	uint32_t signature[JG_BUCKET_WAYS]; /* 0 marks an empty way */
} __rte_aligned(32);

/* Deadlines live in a wheel of 16384 slots of 1.024 us, which spans more
 * than the largest allowed delay, so one lap never needs two turns. The
 * largest delay is 10 ms rather than the 300 us a line-rate port needs: on a
 * slow path (a software switch carrying a few thousand packets a second)
 * a flow's next segment is hundreds of microseconds away. */
#define JG_WHEEL_SLOT_SHIFT 10
#define JG_WHEEL_SLOTS	    16384u
#define JG_MAX_DELAY_US	    10000u
/* jg_merge_next_deadline returns the first occupied slot's earliest
 * deadline, which is only the earliest of all if no deadline is a lap
 * ahead. */
_Static_assert((uint64_t)JG_MAX_DELAY_US * 1000u <
		       ((uint64_t)JG_WHEEL_SLOTS << JG_WHEEL_SLOT_SHIFT),
	       "the timer wheel must span the largest delay");
#define JG_ETM_MAX_SHAPE 64u

struct rte_lpm;
struct rte_lpm6;

struct jg_engine {
	struct jg_engine_config config;
	int run_meta_offset; /* dynamic field offset of struct jg_run_meta,
				or sizeof(struct rte_mbuf): the private area */
	bool meta_in_priv_area;

	struct jg_flow *flows;
	struct jg_flow_key *keys; /* the key of each slot, compared on lookup */
	struct jg_bucket *buckets;
	uint32_t bucket_mask;
	uint32_t flow_capacity;
	uint32_t flows_now;
	uint32_t hash_key[2][10]; /* NH keys of the two bucket choices */
	uint32_t pinned_flows;	  /* flows with JG_FLOW_ONLOADED */
	uint32_t max_pinned;
	uint32_t pin_idle_coarse; /* onload_idle_s in coarse units */
	uint32_t pin_scan_cursor;
	uint32_t recent_slot; /* the slot the last lookup found or made */

	uint32_t wheel[JG_WHEEL_SLOTS]; /* first flow of each slot */
	/* Which slots hold flows, a bit each: finding the next deadline
	 * skips 64 empty slots per word instead of reading each. */
	uint64_t wheel_occupied[JG_WHEEL_SLOTS / 64];
	uint32_t burst_list;  /* flows released at end of call */
	uint32_t wheel_flows; /* flows on the wheel, for idle polls */
	uint64_t next_slot;   /* first slot not yet processed */

	struct rte_mbuf **ready; /* FIFO of packets ready to transmit */
	uint32_t ready_mask;
	uint32_t ready_head;
	uint32_t ready_tail;

	uint64_t now_ns;
	uint64_t held_segments;
	/* Smoothed gap between a burst and the poll before it: how late a
	 * segment may reach the engine after it arrived (jg_observe_poll). */
	uint64_t last_poll_ns;
	uint32_t poll_interval_ns;

	/* Delay model, precomputed. */
	float etm_quantile[JG_ETM_MAX_SHAPE + 1]; /* of Gamma(k, 1) */
	uint32_t rate_threshold_bytes_per_ms;
	uint16_t yield_threshold_permille;
	uint32_t max_delay_ns;
	uint32_t full_packet_ip_length; /* 90% of the internal MTU */

	uint32_t header_room; /* data bytes of one header_pool mbuf */

	struct rte_lpm *pmtu_v4;
	struct rte_lpm6 *pmtu_v6;

	struct jg_stats stats;
	uint64_t memory_bytes;
};

static inline struct jg_run_meta *jg_meta(const struct jg_engine *e,
					  struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, e->run_meta_offset, struct jg_run_meta *);
}

static inline bool jg_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* flow_table.c */
struct jg_flow_hash {
	uint64_t primary;   /* first bucket, signature, fingerprint */
	uint64_t secondary; /* second bucket */
};
int jg_flow_table_init(struct jg_engine *e);
void jg_flow_table_free(struct jg_engine *e);
/* The engine's keyed hash of a flow key. */
void jg_flow_hash(const struct jg_engine *e, const struct jg_flow_key *key,
		  struct jg_flow_hash *hash);
/* Keys equal in the bytes their IP version uses. */
bool jg_flow_key_equal(const struct jg_flow_key *a,
		       const struct jg_flow_key *b);
/* Find a flow; NULL when absent. */
struct jg_flow *jg_flow_find(struct jg_engine *e,
			     const struct jg_flow_key *key);
/* Find or create; creation may evict (and flush) another flow. NULL only
 * when both candidate buckets hold pinned flows. */
struct jg_flow *jg_flow_find_or_create(struct jg_engine *e,
				       const struct jg_flow_key *key);
/* Clear a flow's onload pin (and the count of pins). */
void jg_flow_unpin(struct jg_engine *e, struct jg_flow *f);
/* Free a flow's entry, which holds no segments (an onload taken back). */
void jg_flow_remove(struct jg_engine *e, struct jg_flow *f);
/* Whether one more flow may be pinned, after dropping idle pins found in
 * a bounded scan when the budget is spent. */
bool jg_flow_pin_budget_left(struct jg_engine *e);
static inline uint32_t jg_flow_index(const struct jg_engine *e,
				     const struct jg_flow *f)
{
	return (uint32_t)(f - e->flows);
}

/* emit.c (below the flow table, above the timer wheel; see emit.c):
 * release every run a flow holds, in sequence order. */
void jg_flow_release_all(struct jg_engine *e, struct jg_flow *f);
/* Release the closed runs at the front of a flow (runs behind a hole
 * wait for it); true when any was. Asked after every segment, and most
 * leave the front run open: that answer is given here, without a call. */
bool jg_flow_emit_closed_runs(struct jg_engine *e, struct jg_flow *f);
static inline bool jg_flow_emit_closed_front(struct jg_engine *e,
					     struct jg_flow *f)
{
	return f->runs != NULL &&
	       (jg_meta(e, f->runs)->flags & JG_RUN_CLOSED) &&
	       jg_flow_emit_closed_runs(e, f);
}
/* Hand an input packet on untouched, accounted as passed through. */
void jg_pass_through(struct jg_engine *e, struct rte_mbuf *m);
void jg_ready_push(struct jg_engine *e, struct rte_mbuf *m);
uint16_t jg_ready_drain(struct jg_engine *e, struct rte_mbuf **out,
			uint16_t out_cap);
/* Release the flows whose deadline passed by now_ns, and the burst list. */
void jg_timer_expire(struct jg_engine *e, uint64_t now_ns);
void jg_timer_release_burst_list(struct jg_engine *e);

/* delay.c: the delay model and the timer wheel (calls into no other engine
 * file) */
void jg_delay_model_init(struct jg_engine *e);
void jg_timer_unlink(struct jg_engine *e, struct jg_flow *f);
void jg_timer_schedule(struct jg_engine *e, struct jg_flow *f,
		       uint64_t deadline_ns);
/* The first slot in [from, last] (absolute slot numbers) that holds a
 * flow, or UINT64_MAX. */
uint64_t jg_wheel_next_occupied(const struct jg_engine *e, uint64_t from,
				uint64_t last);
/* The head of a timer list: the burst list or a wheel slot. */
static inline uint32_t *jg_timer_list(struct jg_engine *e, uint16_t list)
{
	return list == JG_TIMER_BURST ? &e->burst_list : &e->wheel[list];
}
/* How long the flow's newest incomplete run may wait, in ns (0: release
 * at the end of the call). */
uint32_t jg_flow_wait_budget(const struct jg_engine *e, const struct jg_flow *f,
			     uint32_t run_payload, uint32_t run_capacity,
			     uint32_t run_segments);
void jg_flow_observe_arrival(struct jg_flow *f, uint32_t payload,
			     uint64_t now_ns);
/* Note a poll at now_ns; one that brought packets also measures the gap
 * since the poll before it. */
void jg_observe_poll(struct jg_engine *e, uint64_t now_ns,
		     bool brought_packets);

/* Account one input segment's delay; inline, as it runs per segment. */
static inline void jg_record_delay(struct jg_engine *e, uint64_t delay_ns)
{
	e->stats.merge.delay_histogram_us[jg_delay_bucket(delay_ns)]++;
	e->stats.merge.delay_sum_ns += delay_ns;
	if (delay_ns > e->stats.merge_delay_max_ns)
		e->stats.merge_delay_max_ns = delay_ns;
}

/* pmtu.c */
int jg_pmtu_init(struct jg_engine *e);
void jg_pmtu_free(struct jg_engine *e);

#endif /* JUMBOGATE_INTERNAL_H */
