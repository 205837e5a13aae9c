/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UDP caravans. UDP has no byte stream to re-cut, so datagrams of one flow
 * ride together: one outer IP/UDP header (the flow's own 5-tuple, DSCP set
 * to the caravan code point), a small header, one record per datagram
 * with what differs between them, then the payloads in order. Unpacking
 * rebuilds every datagram byte for byte, so a caravan is invisible to
 * both ends. Anything that does not check out on the way back is dropped
 * and counted: a half-valid caravan must not leak altered datagrams.
 */
#include <string.h>

#include "internal.h"

#define UDP_HEADER_LENGTH 8u
#define MAX_OPEN_CARAVANS 8
#define RECORDS_MAX_BYTES                                                      \
	(sizeof(struct jg_caravan_header) +                                    \
	 JG_CARAVAN_MAX_DATAGRAMS * sizeof(struct jg_caravan_record))

static uint8_t traffic_class(const uint8_t *l3, uint8_t ip_version)
{
	if (ip_version == 4)
		return ((const struct rte_ipv4_hdr *)l3)->type_of_service;
	return (uint8_t)(rte_be_to_cpu_32(
				 ((const struct rte_ipv6_hdr *)l3)->vtc_flow) >>
			 20);
}

static void set_traffic_class(uint8_t *l3, uint8_t ip_version, uint8_t tc)
{
	if (ip_version == 4) {
		((struct rte_ipv4_hdr *)l3)->type_of_service = tc;
	} else {
		struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)l3;
		uint32_t word = rte_be_to_cpu_32(ip->vtc_flow);

		word = (word & 0xf00fffffu) | ((uint32_t)tc << 20);
		ip->vtc_flow = rte_cpu_to_be_32(word);
	}
}

static bool is_caravan_dscp(const struct jg_engine *e, const uint8_t *l3,
			    uint8_t ip_version)
{
	return (traffic_class(l3, ip_version) >> 2) == e->config.caravan_dscp;
}

/* Fill lengths and checksums of a UDP packet whose header we built. */
static void finish_udp(struct jg_engine *e, struct rte_mbuf *m,
		       const struct jg_parsed *p, bool compute_udp_checksum)
{
	uint8_t *l3 = jg_l3(m, p);
	struct rte_udp_hdr *uh = jg_l4(m, p);
	uint32_t udp_length = UDP_HEADER_LENGTH + p->payload_length;

	jg_set_ip_length(l3, p, p->payload_length);
	uh->dgram_len = rte_cpu_to_be_16((uint16_t)udp_length);
	m->l2_len = p->l2_len;
	m->l3_len = p->l3_len;
	m->l4_len = UDP_HEADER_LENGTH;
	m->ol_flags = 0;
	if (p->ip_version == 4)
		jg_finish_ipv4_header(m, p, e->config.checksum_mode);
	else if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD)
		m->ol_flags |= RTE_MBUF_F_TX_IPV6;
	if (!compute_udp_checksum)
		return;
	uint16_t pseudo = jg_csum_pseudo(l3, p, udp_length);

	if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD) {
		uh->dgram_cksum = pseudo;
		m->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
		return;
	}
	uh->dgram_cksum = 0;
	uint16_t checksum = jg_csum_finish(
		pseudo, rte_raw_cksum(uh, UDP_HEADER_LENGTH),
		jg_csum_mbuf_range(m, jg_header_length(p), p->payload_length));
	/* In UDP a zero checksum means "none". */
	uh->dgram_cksum = checksum == 0 ? 0xffff : checksum;
}

/* ------------------------------------------------------------------ */
/* Pack                                                                */

struct open_caravan {
	struct jg_parsed parsed; /* of the first datagram */
	struct rte_mbuf *members[JG_CARAVAN_MAX_DATAGRAMS];
	uint16_t count;
	uint16_t chain_segments; /* mbufs the caravan will have */
	uint32_t ip_length;	 /* of the caravan so far */
};

static bool packable(const struct jg_engine *e, const struct rte_mbuf *m,
		     const struct jg_parsed *p)
{
	const uint8_t *l3 = jg_l3(m, p);
	uint64_t ip_status = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;

	if (p->l4_protocol != IPPROTO_UDP || !p->l4_complete ||
	    p->is_fragment || p->ipv4_has_options || p->payload_length == 0 ||
	    (p->ip_version == 6 && p->l3_len != sizeof(struct rte_ipv6_hdr)) ||
	    is_caravan_dscp(e, l3, p->ip_version))
		return false;
	/* Unpacking recomputes the IPv4 header checksum; only a datagram
	 * whose checksum is right comes back unchanged. */
	if (p->ip_version == 4 && ip_status != RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
	    rte_raw_cksum(l3, p->l3_len) != 0xffff)
		return false;
	return true;
}

/* Same flow and same header fields that the caravan keeps only once. */
static bool same_outer_fields(const struct rte_mbuf *a,
			      const struct jg_parsed *pa,
			      const struct rte_mbuf *b,
			      const struct jg_parsed *pb)
{
	const uint8_t *fa = rte_pktmbuf_mtod(a, const uint8_t *);
	const uint8_t *fb = rte_pktmbuf_mtod(b, const uint8_t *);
	const uint8_t *la = fa + pa->l2_len, *lb = fb + pb->l2_len;

	if (pa->l2_len != pb->l2_len || pa->l3_len != pb->l3_len ||
	    pa->ip_version != pb->ip_version ||
	    memcmp(fa, fb, pa->l2_len) != 0 ||
	    memcmp(la + pa->l3_len, lb + pb->l3_len, 4) != 0) /* ports */
		return false;
	if (pa->ip_version == 4) {
		const struct rte_ipv4_hdr *x = (const void *)la;
		const struct rte_ipv4_hdr *y = (const void *)lb;

		return x->type_of_service == y->type_of_service &&
		       x->fragment_offset == y->fragment_offset &&
		       x->time_to_live == y->time_to_live &&
		       x->src_addr == y->src_addr && x->dst_addr == y->dst_addr;
	}
	const struct rte_ipv6_hdr *x = (const void *)la;
	const struct rte_ipv6_hdr *y = (const void *)lb;

	return x->vtc_flow == y->vtc_flow && x->hop_limits == y->hop_limits &&
	       memcmp(x->src_addr, y->src_addr, 32) == 0;
}

static bool same_flow(const struct rte_mbuf *a, const struct jg_parsed *pa,
		      const struct rte_mbuf *b, const struct jg_parsed *pb)
{
	struct jg_flow_key ka, kb;

	jg_flow_key_from_packet(a, pa, &ka);
	jg_flow_key_from_packet(b, pb, &kb);
	return memcmp(&ka, &kb, sizeof(ka)) == 0;
}

static uint32_t caravan_overhead(uint16_t count)
{
	return sizeof(struct jg_caravan_header) +
	       count * sizeof(struct jg_caravan_record);
}

/* The copied headers, the caravan header and `count` records are built in
 * one mbuf of the header pool: a caravan must stop growing before they
 * outgrow it, or building it fails and every datagram in it is lost. */
static bool fits_header_buffer(const struct jg_engine *e,
			       const struct open_caravan *c, uint16_t count)
{
	return jg_header_length(&c->parsed) + caravan_overhead(count) <=
	       e->header_room;
}

/* Build the caravan (or return the lone datagram) into out. */
static struct rte_mbuf *close_caravan(struct jg_engine *e,
				      struct open_caravan *c)
{
	struct jg_caravan_stats *stats = &e->stats.caravan;
	struct rte_mbuf *first = c->members[0];
	struct jg_parsed outer = c->parsed;
	uint16_t header_length = jg_header_length(&outer);
	struct rte_mbuf *caravan, *last;
	struct jg_caravan_header *header;
	struct jg_caravan_record *records;
	uint8_t *l3;

	if (c->count == 1) {
		stats->passed_through++;
		return first;
	}
	caravan = jg_mbuf_copy_headers(first, header_length,
				       e->config.header_pool);
	if (caravan == NULL ||
	    rte_pktmbuf_append(caravan, caravan_overhead(c->count)) == NULL) {
		rte_pktmbuf_free(caravan);
		e->stats.drops[JG_DROP_NO_MBUF] += c->count;
		stats->dropped += c->count;
		for (uint16_t i = 0; i < c->count; i++)
			rte_pktmbuf_free(c->members[i]);
		return NULL;
	}
	l3 = jg_l3(caravan, &outer);
	header = rte_pktmbuf_mtod_offset(caravan, struct jg_caravan_header *,
					 header_length);
	records = (struct jg_caravan_record *)(header + 1);
	header->magic = rte_cpu_to_be_16(JG_CARAVAN_MAGIC);
	header->version = JG_CARAVAN_VERSION;
	header->count = (uint8_t)c->count;
	header->original_tos = traffic_class(l3, outer.ip_version);
	header->reserved = 0;
	set_traffic_class(l3, outer.ip_version,
			  (uint8_t)(e->config.caravan_dscp << 2 |
				    (header->original_tos & 0x3)));

	outer.payload_length = caravan_overhead(c->count);
	last = caravan;
	for (uint16_t i = 0; i < c->count; i++) {
		struct rte_mbuf *m = c->members[i];
		struct jg_parsed p;
		const struct rte_udp_hdr *uh;

		jg_parse(m, &p);
		uh = jg_l4(m, &p);
		records[i].payload_length =
			rte_cpu_to_be_16((uint16_t)p.payload_length);
		records[i].ipv4_id =
			p.ip_version == 4
				? ((const struct rte_ipv4_hdr *)jg_l3(m, &p))
					  ->packet_id
				: 0;
		records[i].udp_checksum = uh->dgram_cksum;
		/* Drop Ethernet padding, then the headers. */
		if (m->pkt_len > p.l2_len + p.ip_length)
			rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - p.l2_len -
						       p.ip_length));
		m = jg_mbuf_strip_front(m, jg_header_length(&p));
		last = jg_mbuf_append_chain(caravan, last, m);
		outer.payload_length += p.payload_length;
	}
	finish_udp(e, caravan, &outer, true);
	stats->caravans_packed++;
	stats->datagrams_packed += c->count;
	return caravan;
}

uint16_t jg_caravan_pack(struct jg_engine *e, struct rte_mbuf **pkts,
			 uint16_t nb_pkts, struct rte_mbuf **out,
			 uint16_t out_cap, uint16_t *consumed)
{
	struct open_caravan open[MAX_OPEN_CARAVANS];
	int open_count = 0;
	uint16_t produced = 0, taken = RTE_MIN(nb_pkts, out_cap);

/* Close caravan i, keeping the array dense. */
#define CLOSE_AT(i)                                                            \
	do {                                                                   \
		int at = (i);                                                  \
		struct rte_mbuf *built = close_caravan(e, &open[at]);          \
		if (built != NULL)                                             \
			out[produced++] = built;                               \
		open_count--;                                                  \
		open[at] = open[open_count];                                   \
	} while (0)

	for (uint16_t i = 0; i < taken; i++) {
		struct rte_mbuf *m = pkts[i];
		struct jg_parsed p;
		bool parsed = jg_parse(m, &p);
		bool candidate = parsed && packable(e, m, &p);
		int slot = -1;

		/* A datagram whose flow cannot be read (a first fragment, a
		 * UDP length that does not match) may belong to any open
		 * caravan: they all leave first, so that it cannot overtake
		 * the datagrams of its flow collected before it. */
		if (!parsed || p.l4_protocol != IPPROTO_UDP || !p.l4_complete)
			while (open_count > 0)
				CLOSE_AT(open_count - 1);
		for (int k = 0; k < open_count; k++) {
			struct open_caravan *c = &open[k];

			if (!parsed || p.l4_protocol != IPPROTO_UDP ||
			    !p.l4_complete ||
			    !same_flow(c->members[0], &c->parsed, m, &p))
				continue;
			if (candidate &&
			    same_outer_fields(c->members[0], &c->parsed, m,
					      &p) &&
			    c->count < JG_CARAVAN_MAX_DATAGRAMS &&
			    c->chain_segments + m->nb_segs <=
				    e->config.max_chain_segments &&
			    c->ip_length + sizeof(struct jg_caravan_record) +
					    p.payload_length <=
				    e->config.internal_mtu &&
			    fits_header_buffer(e, c, c->count + 1)) {
				slot = k;
				break;
			}
			/* The flow's next datagram cannot join: what was
			 * collected leaves first, to keep the order. */
			CLOSE_AT(k);
			break;
		}
		if (slot < 0 && candidate) {
			if (open_count == MAX_OPEN_CARAVANS)
				CLOSE_AT(0);
			slot = open_count++;
			open[slot].parsed = p;
			open[slot].count = 0;
			open[slot].chain_segments = 1;
			open[slot].ip_length = p.l3_len + UDP_HEADER_LENGTH +
					       caravan_overhead(0);
		}
		if (slot < 0) {
			e->stats.caravan.passed_through++;
			out[produced++] = m;
			continue;
		}
		open[slot].members[open[slot].count++] = m;
		open[slot].chain_segments += m->nb_segs;
		open[slot].ip_length +=
			sizeof(struct jg_caravan_record) + p.payload_length;
	}
	while (open_count > 0)
		CLOSE_AT(open_count - 1);
#undef CLOSE_AT
	*consumed = taken;
	return produced;
}

/* ------------------------------------------------------------------ */
/* Unpack                                                              */

static void drop_caravan(struct jg_engine *e, struct rte_mbuf *m,
			 enum jg_drop_reason reason)
{
	e->stats.drops[reason]++;
	e->stats.caravan.dropped++;
	rte_pktmbuf_free(m);
}

static bool udp_checksum_good(const struct rte_mbuf *m,
			      const struct jg_parsed *p)
{
	uint64_t status = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
	const struct rte_udp_hdr *uh = jg_l4(m, p);
	uint16_t ignored;

	if (status == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
		return true;
	if (status == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return false;
	if (uh->dgram_cksum == 0)
		return p->ip_version == 4; /* IPv4 allows "no checksum" */
	return jg_l4_checksum_verify(m, p, &ignored);
}

/* Check a caravan; on success copy its header and records to buffer. */
static enum jg_drop_reason validate(const struct rte_mbuf *m,
				    const struct jg_parsed *p, uint8_t *buffer,
				    bool *valid)
{
	const struct jg_caravan_header *header;
	const struct jg_caravan_record *records;
	uint32_t offset = jg_header_length(p), carried = 0;

	*valid = false;
	if (!udp_checksum_good(m, p))
		return JG_DROP_CARAVAN_BAD_CHECKSUM;
	if (p->payload_length < sizeof(*header))
		return JG_DROP_CARAVAN_TRUNCATED;
	header = rte_pktmbuf_read(m, offset, sizeof(*header), buffer);
	if (header == NULL)
		return JG_DROP_CARAVAN_TRUNCATED;
	if (rte_be_to_cpu_16(header->magic) != JG_CARAVAN_MAGIC)
		return JG_DROP_CARAVAN_BAD_MAGIC;
	if (header->version != JG_CARAVAN_VERSION || header->reserved != 0)
		return JG_DROP_CARAVAN_BAD_VERSION;
	if (header->count == 0)
		return JG_DROP_CARAVAN_BAD_COUNT;
	if (p->payload_length < caravan_overhead(header->count))
		return JG_DROP_CARAVAN_TRUNCATED;
	header = rte_pktmbuf_read(m, offset, caravan_overhead(header->count),
				  buffer);
	if (header == NULL)
		return JG_DROP_CARAVAN_TRUNCATED;
	if (header != (const void *)buffer)
		memcpy(buffer, header, caravan_overhead(header->count));
	header = (const void *)buffer;
	records = (const void *)(header + 1);
	for (uint16_t i = 0; i < header->count; i++)
		carried += rte_be_to_cpu_16(records[i].payload_length);
	if (carried + caravan_overhead(header->count) != p->payload_length)
		return JG_DROP_CARAVAN_LENGTH_MISMATCH;
	*valid = true;
	return JG_DROP_REASON_COUNT;
}

/* Rebuild datagram i; NULL when no mbuf could be had. */
static struct rte_mbuf *rebuild_datagram(struct jg_engine *e,
					 struct rte_mbuf *caravan,
					 const struct jg_parsed *outer,
					 const struct jg_caravan_header *header,
					 const struct jg_caravan_record *record,
					 uint32_t payload_offset)
{
	uint16_t length = rte_be_to_cpu_16(record->payload_length);
	struct rte_mbuf *datagram = jg_mbuf_copy_headers(
		caravan, jg_header_length(outer), e->config.header_pool);
	struct jg_parsed p = *outer;
	uint8_t *l3;

	if (datagram == NULL)
		return NULL;
	if (length > 0) {
		struct rte_mbuf *payload = jg_mbuf_reference_range(
			caravan, payload_offset, length, e->config.header_pool);

		if (payload == NULL) {
			rte_pktmbuf_free(datagram);
			return NULL;
		}
		jg_mbuf_append_chain(datagram, datagram, payload);
	}
	l3 = jg_l3(datagram, &p);
	set_traffic_class(l3, p.ip_version, header->original_tos);
	if (p.ip_version == 4)
		((struct rte_ipv4_hdr *)l3)->packet_id = record->ipv4_id;
	((struct rte_udp_hdr *)jg_l4(datagram, &p))->dgram_cksum =
		record->udp_checksum;
	p.payload_length = length;
	finish_udp(e, datagram, &p, false);
	return datagram;
}

uint16_t jg_caravan_unpack(struct jg_engine *e, struct rte_mbuf **pkts,
			   uint16_t nb_pkts, struct rte_mbuf **out,
			   uint16_t out_cap, uint16_t *consumed)
{
	struct jg_caravan_stats *stats = &e->stats.caravan;
	uint8_t buffer[RECORDS_MAX_BYTES];
	uint16_t produced = 0, i;

	for (i = 0; i < nb_pkts; i++) {
		struct rte_mbuf *m = pkts[i];
		struct jg_parsed p;
		const struct jg_caravan_header *header = (const void *)buffer;
		const struct jg_caravan_record *records =
			(const void *)(header + 1);
		enum jg_drop_reason reason;
		bool valid;

		if (!jg_parse(m, &p) || p.l4_protocol != IPPROTO_UDP ||
		    !p.l4_complete ||
		    !is_caravan_dscp(e, jg_l3(m, &p), p.ip_version)) {
			if (produced == out_cap)
				break;
			stats->passed_through++;
			out[produced++] = m;
			continue;
		}
		if (p.is_fragment || p.ipv4_has_options ||
		    (p.ip_version == 6 &&
		     p.l3_len != sizeof(struct rte_ipv6_hdr))) {
			drop_caravan(e, m, JG_DROP_CARAVAN_BAD_VERSION);
			continue;
		}
		reason = validate(m, &p, buffer, &valid);
		if (!valid) {
			drop_caravan(e, m, reason);
			continue;
		}
		if (produced + header->count > out_cap)
			break;

		uint32_t offset =
			jg_header_length(&p) + caravan_overhead(header->count);
		uint16_t k;

		for (k = 0; k < header->count; k++) {
			struct rte_mbuf *datagram = rebuild_datagram(
				e, m, &p, header, &records[k], offset);

			if (datagram == NULL)
				break;
			out[produced + k] = datagram;
			offset += rte_be_to_cpu_16(records[k].payload_length);
		}
		if (k < header->count) {
			rte_pktmbuf_free_bulk(&out[produced], k);
			drop_caravan(e, m, JG_DROP_NO_MBUF);
			continue;
		}
		produced = (uint16_t)(produced + k);
		stats->caravans_unpacked++;
		stats->datagrams_unpacked += k;
		rte_pktmbuf_free(m);
	}
	*consumed = i;
	return produced;
}
