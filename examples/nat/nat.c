/* SPDX-License-Identifier: Apache-2.0 */
/* The NAT of nat.h: its connection table, its translation, and the
 * engine around it. */
#include "nat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <jumbogate/engine.h>

/* Largest burst nat_receive takes at once (larger ones are cut). */
#define NAT_MAX_BURST 256
/* jg_merge_burst wants room for the burst and 64 more. */
#define MERGE_OUT (NAT_MAX_BURST + 64)
/* Split output per call; jg_split_burst takes at least one input when
 * out_cap >= 64, and an 8500-byte packet is at most a few dozen segments. */
#define SPLIT_OUT 512
/* Idle connections looked at per burst, from the least recently used. */
#define SWEEP_PER_BURST 4
#define NONE		UINT32_MAX

struct conn_key {
	uint32_t inside_ip, remote_ip; /* network order */
	uint16_t inside_port, remote_port;
	uint8_t protocol;
	uint8_t pad[3];
};

struct conn {
	struct conn_key key;
	uint64_t last_ns;
	uint32_t prev, next; /* LRU list: head most recent */
	bool used;
};

struct nat {
	struct nat_config config;
	nat_send_fn send;
	void *send_context;
	struct jg_engine *engine[NAT_DIRS];
	struct rte_hash *by_inside; /* conn_key -> index */
	struct conn *conns;
	uint32_t *free_list;
	uint32_t free_count;
	uint32_t lru_head, lru_tail;
	struct nat_stats stats;
	struct rte_mbuf *merged[MERGE_OUT];
	struct rte_mbuf *split[SPLIT_OUT];
};

static const char *const drop_names[] = {
#define NAT_DROP_NAME(name, text) text,
	NAT_DROP_REASONS(NAT_DROP_NAME)
#undef NAT_DROP_NAME
};

const char *nat_drop_reason_name(enum nat_drop_reason reason)
{
	return reason < NAT_DROP_REASON_COUNT ? drop_names[reason] : "?";
}

void nat_config_init(struct nat_config *config)
{
	memset(config, 0, sizeof(*config));
	config->port_base = 20000;
	config->max_connections = 4096;
	config->idle_timeout_ns = 60ull * 1000000000ull;
	config->merge = true;
	config->merge_mtu = JG_DEFAULT_INTERNAL_MTU;
	config->path_mtu[NAT_OUTBOUND] = 1500;
	config->path_mtu[NAT_INBOUND] = 1500;
	config->name = "nat";
}

/* ---- connection table ---------------------------------------------- */

static void lru_unlink(struct nat *nat, uint32_t i)
{
	struct conn *c = &nat->conns[i];

	if (c->prev != NONE)
		nat->conns[c->prev].next = c->next;
	else
		nat->lru_head = c->next;
	if (c->next != NONE)
		nat->conns[c->next].prev = c->prev;
	else
		nat->lru_tail = c->prev;
	c->prev = c->next = NONE;
}

static void lru_push_head(struct nat *nat, uint32_t i)
{
	struct conn *c = &nat->conns[i];

	c->prev = NONE;
	c->next = nat->lru_head;
	if (nat->lru_head != NONE)
		nat->conns[nat->lru_head].prev = i;
	nat->lru_head = i;
	if (nat->lru_tail == NONE)
		nat->lru_tail = i;
}

static void touch(struct nat *nat, uint32_t i, uint64_t now_ns)
{
	nat->conns[i].last_ns = now_ns;
	if (nat->lru_head != i) {
		lru_unlink(nat, i);
		lru_push_head(nat, i);
	}
}

static void release(struct nat *nat, uint32_t i)
{
	struct conn *c = &nat->conns[i];

	rte_hash_del_key(nat->by_inside, &c->key);
	lru_unlink(nat, i);
	c->used = false;
	nat->free_list[nat->free_count++] = i;
	nat->stats.connections_now--;
	nat->stats.connections_evicted++;
}

static bool idle(const struct nat *nat, uint32_t i, uint64_t now_ns)
{
	return now_ns - nat->conns[i].last_ns >= nat->config.idle_timeout_ns;
}

/* The eviction rule: idle connections go, least recently used first. */
static void sweep(struct nat *nat, uint64_t now_ns)
{
	for (int n = 0; n < SWEEP_PER_BURST && nat->lru_tail != NONE; n++) {
		if (!idle(nat, nat->lru_tail, now_ns))
			break;
		release(nat, nat->lru_tail);
	}
}

/* The connection of an outbound packet, created if new; NONE when the
 * table is full and nothing in it is idle. */
static uint32_t outbound_conn(struct nat *nat, const struct conn_key *key,
			      uint64_t now_ns)
{
	void *data;
	uint32_t i;

	if (rte_hash_lookup_data(nat->by_inside, key, &data) >= 0) {
		i = (uint32_t)(uintptr_t)data;
		touch(nat, i, now_ns);
		return i;
	}
	if (nat->free_count == 0) {
		if (nat->lru_tail == NONE ||
		    !idle(nat, nat->lru_tail, now_ns)) {
			nat->stats.connections_refused++;
			return NONE;
		}
		release(nat, nat->lru_tail);
	}
	i = nat->free_list[--nat->free_count];
	if (rte_hash_add_key_data(nat->by_inside, key, (void *)(uintptr_t)i) !=
	    0) {
		/* Cannot happen with a table sized for every entry. */
		nat->free_list[nat->free_count++] = i;
		nat->stats.connections_refused++;
		return NONE;
	}
	nat->conns[i].key = *key;
	nat->conns[i].used = true;
	nat->conns[i].last_ns = now_ns;
	lru_push_head(nat, i);
	nat->stats.connections_now++;
	nat->stats.connections_created++;
	return i;
}

/* ---- packets ----------------------------------------------------------- */

struct headers {
	struct rte_ipv4_hdr *ip;
	uint16_t *ports;    /* source, destination */
	uint16_t *checksum; /* L4 checksum field */
	uint8_t protocol;
	/* The port sums what the engine built (JG_CHECKSUM_OFFLOAD): the IP
	 * checksum is left to it, the L4 field holds the pseudo-header sum. */
	bool ip_offloaded, l4_offloaded;
};

/* Check everything the translation reads, in the first segment. Returns
 * NAT_DROP_REASON_COUNT for a packet fit to translate. */
static enum nat_drop_reason parse(struct rte_mbuf *m, struct headers *h)
{
	uint32_t have = rte_pktmbuf_data_len(m);
	uint8_t *p = rte_pktmbuf_mtod(m, uint8_t *);
	const struct rte_ether_hdr *eth = (const void *)p;
	uint32_t ip_length, total, l4;
	uint16_t fragment;

	if (have < sizeof(*eth) || rte_pktmbuf_pkt_len(m) < have)
		return NAT_DROP_MALFORMED;
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return NAT_DROP_NOT_IPV4;
	if (have < sizeof(*eth) + sizeof(struct rte_ipv4_hdr))
		return NAT_DROP_MALFORMED;
	h->ip = (struct rte_ipv4_hdr *)(p + sizeof(*eth));
	if ((h->ip->version_ihl >> 4) != 4)
		return NAT_DROP_MALFORMED;
	ip_length = (uint32_t)(h->ip->version_ihl & 0xf) * 4;
	total = rte_be_to_cpu_16(h->ip->total_length);
	if (ip_length < sizeof(struct rte_ipv4_hdr) || total < ip_length ||
	    sizeof(*eth) + total > rte_pktmbuf_pkt_len(m))
		return NAT_DROP_MALFORMED;
	fragment = rte_be_to_cpu_16(h->ip->fragment_offset);
	if (fragment & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return NAT_DROP_FRAGMENT;
	h->protocol = h->ip->next_proto_id;
	l4 = sizeof(*eth) + ip_length;
	if (h->protocol == IPPROTO_TCP) {
		const struct rte_tcp_hdr *tcp = (const void *)(p + l4);
		uint32_t tcp_length;

		if (total < ip_length + sizeof(*tcp) ||
		    have < l4 + sizeof(*tcp))
			return NAT_DROP_MALFORMED;
		tcp_length = (uint32_t)(tcp->data_off >> 4) * 4;
		if (tcp_length < sizeof(*tcp) ||
		    total < ip_length + tcp_length || have < l4 + tcp_length)
			return NAT_DROP_MALFORMED;
		h->checksum = (uint16_t *)(p + l4 + 16);
	} else if (h->protocol == IPPROTO_UDP) {
		const struct rte_udp_hdr *udp = (const void *)(p + l4);
		uint32_t udp_length;

		if (total < ip_length + sizeof(*udp) ||
		    have < l4 + sizeof(*udp))
			return NAT_DROP_MALFORMED;
		udp_length = rte_be_to_cpu_16(udp->dgram_len);
		if (udp_length < sizeof(*udp) || udp_length > total - ip_length)
			return NAT_DROP_MALFORMED;
		h->checksum = (uint16_t *)(p + l4 + 6);
	} else {
		return NAT_DROP_UNSUPPORTED;
	}
	h->ports = (uint16_t *)(p + l4);
	h->ip_offloaded = (m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) != 0;
	h->l4_offloaded = (m->ol_flags & RTE_MBUF_F_TX_L4_MASK) != 0;
	return NAT_DROP_REASON_COUNT;
}

/* RFC 1624: a one's complement checksum after 16-bit words of what it
 * covers changed from old to new (all in network order). */
static uint16_t checksum_update(uint16_t checksum, const uint16_t *old,
				const uint16_t *new, unsigned int words)
{
	uint32_t sum = (uint16_t)~checksum;

	for (unsigned int i = 0; i < words; i++)
		sum += (uint16_t)~old[i] + (uint32_t) new[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Replace the source (or destination) address and port, in the IP
 * header and in the L4 checksum (the pseudo-header covers the address). */
static void rewrite(struct headers *h, bool source, uint32_t new_address,
		    uint16_t new_port)
{
	uint8_t *address = (uint8_t *)h->ip + (source ? 12 : 16);
	uint16_t *port = &h->ports[source ? 0 : 1];
	uint16_t old[3], new[3];

	memcpy(old, address, 4);
	old[2] = *port;
	memcpy(new, &new_address, 4);
	new[2] = new_port;
	if (!h->ip_offloaded)
		h->ip->hdr_checksum =
			checksum_update(h->ip->hdr_checksum, old, new, 2);
	if (h->l4_offloaded) {
		/* The pseudo-header sum is the complement of a checksum of
		 * the pseudo-header alone; the port reads no ports from it. */
		*h->checksum = (uint16_t)~checksum_update(
			(uint16_t) ~*h->checksum, old, new, 2);
	} else if (h->protocol == IPPROTO_TCP || *h->checksum != 0) {
		/* A UDP checksum of 0 means none; a computed 0 is sent as
		 * 0xffff. */
		uint16_t sum = checksum_update(*h->checksum, old, new, 3);

		if (h->protocol == IPPROTO_UDP && sum == 0)
			sum = 0xffff;
		*h->checksum = sum;
	}
	memcpy(address, &new_address, 4);
	*port = new_port;
}

static enum nat_drop_reason translate_one(struct nat *nat, enum nat_dir dir,
					  struct rte_mbuf *m, uint64_t now_ns)
{
	struct headers h;
	enum nat_drop_reason reason = parse(m, &h);
	uint32_t i;

	if (reason != NAT_DROP_REASON_COUNT)
		return reason;
	if (dir == NAT_OUTBOUND) {
		struct conn_key key = {
			.inside_ip = h.ip->src_addr,
			.remote_ip = h.ip->dst_addr,
			.inside_port = h.ports[0],
			.remote_port = h.ports[1],
			.protocol = h.protocol,
		};

		i = outbound_conn(nat, &key, now_ns);
		if (i == NONE)
			return NAT_DROP_TABLE_FULL;
		rewrite(&h, true, nat->config.public_ip,
			rte_cpu_to_be_16(
				(uint16_t)(nat->config.port_base + i)));
	} else {
		const struct conn *c;

		i = (uint32_t)rte_be_to_cpu_16(h.ports[1]) -
		    nat->config.port_base;
		if (h.ip->dst_addr != nat->config.public_ip ||
		    i >= nat->config.max_connections)
			return NAT_DROP_NO_MAPPING;
		c = &nat->conns[i];
		if (!c->used || c->key.protocol != h.protocol ||
		    c->key.remote_ip != h.ip->src_addr ||
		    c->key.remote_port != h.ports[0])
			return NAT_DROP_NO_MAPPING;
		touch(nat, i, now_ns);
		rewrite(&h, false, c->key.inside_ip, c->key.inside_port);
	}
	return NAT_DROP_REASON_COUNT;
}

static uint64_t monotonic_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* The benchmark's stand-in for a costlier NF (nat_config.work_ns). */
static void spin(uint32_t ns)
{
	uint64_t until = monotonic_ns() + ns;

	while (monotonic_ns() < until)
		;
}

/* Translate pkts in place; what fails a check is dropped. Returns how
 * many are left, in order. */
static uint16_t translate(struct nat *nat, enum nat_dir dir,
			  struct rte_mbuf **pkts, uint16_t count,
			  uint64_t now_ns)
{
	struct nat_dir_stats *s = &nat->stats.dir[dir];
	uint16_t kept = 0;

	for (uint16_t n = 0; n < count; n++) {
		struct rte_mbuf *m = pkts[n];
		enum nat_drop_reason reason =
			translate_one(nat, dir, m, now_ns);

		if (reason != NAT_DROP_REASON_COUNT) {
			nat->stats.drops[reason]++;
			s->dropped++;
			rte_pktmbuf_free(m);
			continue;
		}
		s->translated++;
		s->translated_bytes += rte_pktmbuf_pkt_len(m);
		if (nat->config.work_ns != 0)
			spin(nat->config.work_ns);
		pkts[kept++] = m;
	}
	return kept;
}

static void emit(struct nat *nat, enum nat_dir dir, struct rte_mbuf **pkts,
		 uint16_t count)
{
	struct nat_dir_stats *s = &nat->stats.dir[dir];

	if (count == 0)
		return;
	s->tx_packets += count;
	for (uint16_t n = 0; n < count; n++)
		s->tx_bytes += rte_pktmbuf_pkt_len(pkts[n]);
	nat->send(nat->send_context, dir, pkts, count);
}

/* What the engine released: translated once per merged packet, then cut
 * to the path MTU of the side it leaves through. */
static void after_merge(struct nat *nat, enum nat_dir dir,
			struct rte_mbuf **pkts, uint16_t count, uint64_t now_ns)
{
	uint16_t done = 0;

	count = translate(nat, dir, pkts, count, now_ns);
	while (done < count) {
		uint16_t consumed = 0;
		uint16_t produced = jg_split_burst(
			nat->engine[dir], pkts + done, count - done, nat->split,
			SPLIT_OUT, &consumed);

		emit(nat, dir, nat->split, produced);
		done += consumed;
		if (consumed == 0) {
			/* Not with SPLIT_OUT >= 64; never spin. */
			rte_pktmbuf_free_bulk(pkts + done, count - done);
			break;
		}
	}
}

void nat_receive(struct nat *nat, enum nat_dir dir, struct rte_mbuf **pkts,
		 uint16_t count, uint64_t now_ns)
{
	struct nat_dir_stats *s = &nat->stats.dir[dir];

	while (count > NAT_MAX_BURST) {
		nat_receive(nat, dir, pkts, NAT_MAX_BURST, now_ns);
		pkts += NAT_MAX_BURST;
		count -= NAT_MAX_BURST;
	}
	s->rx_packets += count;
	for (uint16_t n = 0; n < count; n++)
		s->rx_bytes += rte_pktmbuf_pkt_len(pkts[n]);
	sweep(nat, now_ns);
	if (!nat->config.merge) {
		emit(nat, dir, pkts, translate(nat, dir, pkts, count, now_ns));
		return;
	}
	count = jg_merge_burst(nat->engine[dir], pkts, count, now_ns,
			       nat->merged, MERGE_OUT);
	after_merge(nat, dir, nat->merged, count, now_ns);
}

void nat_idle(struct nat *nat, enum nat_dir dir, uint64_t now_ns)
{
	struct jg_engine *engine = nat->engine[dir];

	if (engine == NULL)
		return;
	jg_merge_note_poll(engine, now_ns);
	while (jg_merge_next_deadline(engine) <= now_ns) {
		uint16_t count =
			jg_merge_timer(engine, now_ns, nat->merged, MERGE_OUT);

		if (count == 0)
			break;
		after_merge(nat, dir, nat->merged, count, now_ns);
	}
}

void nat_flush(struct nat *nat, uint64_t now_ns)
{
	for (int dir = 0; dir < NAT_DIRS; dir++) {
		uint16_t count;

		if (nat->engine[dir] == NULL)
			continue;
		while ((count = jg_merge_flush_all(nat->engine[dir],
						   nat->merged, MERGE_OUT)) > 0)
			after_merge(nat, (enum nat_dir)dir, nat->merged, count,
				    now_ns);
	}
}

uint64_t nat_next_deadline(const struct nat *nat)
{
	uint64_t next = UINT64_MAX;

	for (int dir = 0; dir < NAT_DIRS; dir++) {
		if (nat->engine[dir] != NULL) {
			uint64_t d = jg_merge_next_deadline(nat->engine[dir]);

			next = d < next ? d : next;
		}
	}
	return next;
}

void nat_get_stats(const struct nat *nat, struct nat_stats *stats)
{
	*stats = nat->stats;
}

struct jg_engine *nat_engine(struct nat *nat, enum nat_dir dir)
{
	return nat->engine[dir];
}

/* ---- life ------------------------------------------------------------- */

static struct jg_engine *engine_create(const struct nat_config *config,
				       enum nat_dir dir)
{
	struct jg_engine_config c;
	char name[64];

	jg_engine_config_init(&c);
	snprintf(name, sizeof(name), "%s_%s", config->name,
		 dir == NAT_OUTBOUND ? "out" : "in");
	c.name = name;
	c.internal_mtu = config->merge_mtu;
	c.header_pool = config->header_pool;
	/* Every pool of this program has the private area. */
	c.run_meta_in_priv_area = true;
	/* Both ends of a NATed connection keep the MSS they agreed on:
	 * merging is the NAT's own affair, and split undoes it on the way
	 * out, so nothing asks an endpoint to send larger segments. */
	c.raise_syn_mss = false;
	c.default_path_mtu_v4 = config->path_mtu[dir];
	c.checksum_mode = config->checksum_offload ? JG_CHECKSUM_OFFLOAD
						   : JG_CHECKSUM_SOFTWARE;
	c.max_flows = 16384;
	if (config->merge_wait_us > 0) {
		c.delay.wait_always = true;
		c.delay.max_delay_us = config->merge_wait_us;
	}
	return jg_engine_create(&c);
}

struct nat *nat_create(const struct nat_config *config, nat_send_fn send,
		       void *send_context)
{
	struct nat *nat;
	char name[64];
	uint32_t n = config->max_connections;

	if (n == 0 || (uint32_t)config->port_base + n > 65536) {
		fprintf(stderr, "nat: ports %u..%u are not all ports\n",
			config->port_base, config->port_base + n - 1);
		return NULL;
	}
	nat = rte_zmalloc("nat", sizeof(*nat), RTE_CACHE_LINE_SIZE);
	if (nat == NULL)
		return NULL;
	nat->config = *config;
	nat->send = send;
	nat->send_context = send_context;
	nat->conns = rte_zmalloc("nat_conns", sizeof(*nat->conns) * n,
				 RTE_CACHE_LINE_SIZE);
	nat->free_list = rte_malloc("nat_free", sizeof(uint32_t) * n, 0);
	snprintf(name, sizeof(name), "%s_conns", config->name);
	/* Sized once for every connection; the extendable buckets make
	 * every insert below that size succeed. */
	struct rte_hash_parameters params = {
		.name = name,
		.entries = n < 8 ? 8 : n,
		.key_len = sizeof(struct conn_key),
		.hash_func = rte_jhash,
		.socket_id = SOCKET_ID_ANY,
		.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	nat->by_inside = rte_hash_create(&params);
	if (nat->conns == NULL || nat->free_list == NULL ||
	    nat->by_inside == NULL) {
		fprintf(stderr, "nat: no memory for %u connections: %s\n", n,
			rte_strerror(rte_errno));
		nat_destroy(nat);
		return NULL;
	}
	/* Lowest ports first. */
	for (uint32_t i = 0; i < n; i++)
		nat->free_list[i] = n - 1 - i;
	nat->free_count = n;
	nat->lru_head = nat->lru_tail = NONE;
	for (uint32_t i = 0; i < n; i++)
		nat->conns[i].prev = nat->conns[i].next = NONE;
	nat->stats.connections_max = n;
	if (config->merge) {
		for (int dir = 0; dir < NAT_DIRS; dir++) {
			nat->engine[dir] =
				engine_create(config, (enum nat_dir)dir);
			if (nat->engine[dir] == NULL) {
				fprintf(stderr, "nat: engine: %s\n",
					rte_strerror(rte_errno));
				nat_destroy(nat);
				return NULL;
			}
		}
	}
	return nat;
}

void nat_destroy(struct nat *nat)
{
	if (nat == NULL)
		return;
	for (int dir = 0; dir < NAT_DIRS; dir++)
		if (nat->engine[dir] != NULL)
			jg_engine_destroy(nat->engine[dir]);
	rte_hash_free(nat->by_inside);
	rte_free(nat->conns);
	rte_free(nat->free_list);
	rte_free(nat);
}
