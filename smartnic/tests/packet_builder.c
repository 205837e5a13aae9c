/* SPDX-License-Identifier: Apache-2.0 */
#include "packet_builder.h"

#include <string.h>

#include <sanitizer/asan_interface.h>

#include <rte_mbuf.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

uint32_t pb_sum(const uint8_t *data, size_t length, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < length; i += 2)
		sum += get16(data + i);
	if (i < length)
		sum += (uint32_t)data[i] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

uint16_t pb_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

void pb_defaults(struct pb_spec *s, uint8_t ip_version)
{
	static const uint8_t src6[16] = {0x20, 0x01, 0x0d,    0xb8,
					 0,    1,    [15] = 1};
	static const uint8_t dst6[16] = {0x20, 0x01, 0x0d,    0xb8,
					 0,    2,    [15] = 2};

	memset(s, 0, sizeof(*s));
	s->ip_version = ip_version;
	s->l4_protocol = 6;
	s->src_v4 = 0xc6336401; /* 198.51.100.1 */
	s->dst_v4 = 0x0a000002; /* 10.0.0.2 */
	memcpy(s->src_v6, src6, 16);
	memcpy(s->dst_v6, dst6, 16);
	s->src_port = 443;
	s->dst_port = 40000;
	s->seq = 1000;
	s->ack = 777;
	s->tcp_flags = PB_TCP_ACK;
	s->window = 512;
	s->ttl = 64;
	s->dont_fragment = true;
	s->ip_id = 100;
}

void pb_stream_fill(uint32_t stream, uint32_t offset, uint8_t *buffer,
		    uint32_t length)
{
	for (uint32_t i = 0; i < length; i++)
		buffer[i] = pb_stream_byte(stream, offset + i);
}

static uint32_t l4_sum_with_pseudo(const uint8_t *l3, uint8_t ip_version,
				   uint8_t protocol, const uint8_t *l4,
				   uint32_t l4_length)
{
	uint32_t sum;

	if (ip_version == 4) {
		sum = pb_sum(l3 + 12, 8, 0);
	} else {
		sum = pb_sum(l3 + 8, 32, 0);
		sum += l4_length >> 16;
	}
	sum += protocol;
	sum += l4_length & 0xffff;
	return pb_sum(l4, l4_length, sum);
}

uint32_t pb_frame(const struct pb_spec *s, uint8_t *f)
{
	uint32_t o = 12, l3, l4, l4_header, l3_header;
	uint8_t protocol = s->l4_protocol ? s->l4_protocol : 6;

	memset(f, 0, 12);
	f[0] = 0x02; /* locally administered MACs */
	f[5] = 0x02;
	f[6] = 0x02;
	f[11] = 0x01;
	if (s->vlan) {
		put16(f + o, 0x8100);
		put16(f + o + 2, s->vlan_tci);
		o += 4;
	}
	put16(f + o, s->ip_version == 4 ? 0x0800 : 0x86dd);
	o += 2;
	l3 = o;
	if (s->ip_version == 4) {
		l3_header = 20 + s->ip_options_length;
		memset(f + l3, 0, 20);
		f[l3] = (uint8_t)(0x40 | (l3_header / 4));
		f[l3 + 1] = s->tos;
		put16(f + l3 + 4, s->ip_id);
		put16(f + l3 + 6, (uint16_t)((s->dont_fragment ? 0x4000 : 0) |
					     (s->more_fragments ? 0x2000 : 0) |
					     (s->fragment_offset & 0x1fff)));
		f[l3 + 8] = s->ttl;
		f[l3 + 9] = protocol;
		put32(f + l3 + 12, s->src_v4);
		put32(f + l3 + 16, s->dst_v4);
		memcpy(f + l3 + 20, s->ip_options, s->ip_options_length);
	} else {
		uint8_t *next = f + l3 + 6;
		uint32_t e = l3 + 40;

		put32(f + l3, 0x60000000u | (uint32_t)s->tos << 20 |
				      (s->flow_label & 0xfffff));
		f[l3 + 7] = s->ttl;
		memcpy(f + l3 + 8, s->src_v6, 16);
		memcpy(f + l3 + 24, s->dst_v6, 16);
		if (s->ipv6_destination_options_length) {
			uint32_t length = s->ipv6_destination_options_length;

			*next = 60;
			next = f + e;
			f[e + 1] = (uint8_t)(length / 8 - 1);
			/* PadN option filling the header. */
			f[e + 2] = 1;
			f[e + 3] = (uint8_t)(length - 4);
			memset(f + e + 4, s->ipv6_destination_options_fill,
			       length - 4);
			e += length;
		}
		if (s->ipv6_fragment_header) {
			*next = 44;
			next = f + e;
			memset(f + e, 0, 8);
			put16(f + e + 2,
			      (uint16_t)(s->fragment_offset << 3 |
					 (s->more_fragments ? 1 : 0)));
			put32(f + e + 4, 0x1234);
			e += 8;
		}
		*next = protocol;
		l3_header = e - l3;
	}
	l4 = l3 + l3_header;
	if (protocol == 6) {
		l4_header = 20 + s->tcp_options_length;
		memset(f + l4, 0, 20);
		put16(f + l4, s->src_port);
		put16(f + l4 + 2, s->dst_port);
		put32(f + l4 + 4, s->seq);
		put32(f + l4 + 8, s->ack);
		f[l4 + 12] = (uint8_t)((l4_header / 4) << 4);
		f[l4 + 13] = s->tcp_flags;
		put16(f + l4 + 14, s->window);
		put16(f + l4 + 18, s->urgent_pointer);
		memcpy(f + l4 + 20, s->tcp_options, s->tcp_options_length);
	} else {
		l4_header = 8;
		put16(f + l4, s->src_port);
		put16(f + l4 + 2, s->dst_port);
		put16(f + l4 + 4, (uint16_t)(8 + s->payload_length));
		put16(f + l4 + 6, 0);
	}
	if (s->payload_length)
		memcpy(f + l4 + l4_header, s->payload, s->payload_length);
	uint32_t l4_length = l4_header + s->payload_length;
	uint32_t ip_length = l3_header + l4_length;

	if (s->ip_version == 4) {
		put16(f + l3 + 2, (uint16_t)ip_length);
		put16(f + l3 + 10,
		      (uint16_t)~pb_fold(pb_sum(f + l3, l3_header, 0)));
	} else {
		put16(f + l3 + 4, (uint16_t)(ip_length - 40));
	}
	if (protocol == 6 || protocol == 17) {
		uint32_t checksum_at = l4 + (protocol == 6 ? 16 : 6);
		uint16_t checksum = (uint16_t)~pb_fold(l4_sum_with_pseudo(
			f + l3, s->ip_version, protocol, f + l4, l4_length));

		if (protocol == 17 && checksum == 0)
			checksum = 0xffff;
		if (protocol == 17 && s->udp_no_checksum)
			checksum = 0;
		if (protocol == 17 && s->udp_checksum_override)
			checksum = s->udp_checksum_override;
		if (s->corrupt_l4_checksum)
			checksum ^= 0x5a5a;
		put16(f + checksum_at, checksum);
	}
	memset(f + l4 + l4_length, 0, s->ethernet_padding);
	return l4 + l4_length + s->ethernet_padding;
}

struct rte_mbuf *pb_from_bytes(struct rte_mempool *pool, const uint8_t *bytes,
			       uint32_t length, uint16_t segment_size)
{
	struct rte_mbuf *head = NULL, *last = NULL;
	uint32_t done = 0;

	do {
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		uint32_t room, take;
		char *data;

		if (m == NULL) {
			rte_pktmbuf_free(head);
			return NULL;
		}
		/* It may come back from a frame pb_poison_slack marked. */
		ASAN_UNPOISON_MEMORY_REGION(m->buf_addr, m->buf_len);
		room = rte_pktmbuf_tailroom(m);
		take = length - done;
		if (segment_size != 0 && take > segment_size)
			take = segment_size;
		if (take > room)
			take = room;
		data = rte_pktmbuf_append(m, (uint16_t)take);
		memcpy(data, bytes + done, take);
		done += take;
		if (head == NULL) {
			head = m;
		} else {
			last->next = m;
			head->nb_segs++;
			head->pkt_len += take;
		}
		last = m;
	} while (done < length);
	return head;
}

void pb_poison_slack(struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next) {
		uint8_t *buffer = m->buf_addr;
		uint32_t end = (uint32_t)m->data_off + m->data_len;

		ASAN_POISON_MEMORY_REGION(buffer, m->data_off);
		ASAN_POISON_MEMORY_REGION(buffer + end, m->buf_len - end);
	}
}

struct rte_mbuf *pb_build(struct rte_mempool *pool, const struct pb_spec *spec)
{
	static uint8_t frame[PB_MAX_FRAME];
	uint32_t length = pb_frame(spec, frame);

	return pb_from_bytes(pool, frame, length, spec->segment_size);
}

/* What a port does with the TX offload flags. */
static const char *apply_tx_offload(const struct rte_mbuf *m, uint8_t *f,
				    uint32_t length)
{
	uint64_t l4_request = m->ol_flags & RTE_MBUF_F_TX_L4_MASK;
	uint32_t l3 = m->l2_len, l4 = m->l2_len + m->l3_len;

	if (m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) {
		if (!(m->ol_flags & RTE_MBUF_F_TX_IPV4) || l4 > length)
			return "IP checksum offload without IPv4 lengths";
		put16(f + l3 + 10, 0);
		put16(f + l3 + 10,
		      (uint16_t)~pb_fold(pb_sum(f + l3, m->l3_len, 0)));
	}
	if (l4_request == RTE_MBUF_F_TX_TCP_CKSUM ||
	    l4_request == RTE_MBUF_F_TX_UDP_CKSUM) {
		uint8_t version = f[l3] >> 4;
		uint32_t ip_length = version == 4 ? get16(f + l3 + 2)
						  : 40u + get16(f + l3 + 4);
		uint32_t l4_length = ip_length - m->l3_len;
		uint32_t at =
			l4 + (l4_request == RTE_MBUF_F_TX_TCP_CKSUM ? 16 : 6);
		uint32_t pseudo;
		uint8_t protocol =
			l4_request == RTE_MBUF_F_TX_TCP_CKSUM ? 6 : 17;

		if (!(m->ol_flags & (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IPV6)))
			return "L4 checksum offload without IP version flag";
		if (version == 4)
			pseudo = pb_sum(f + l3 + 12, 8, 0);
		else
			pseudo = pb_sum(f + l3 + 8, 32, 0);
		pseudo += protocol + l4_length;
		/* The port expects the pseudo-header sum in the field. */
		if (get16(f + at) != pb_fold(pseudo))
			return "L4 checksum field is not the pseudo-header sum";
		put16(f + at, 0);
		uint16_t checksum =
			(uint16_t)~pb_fold(pb_sum(f + l4, l4_length, pseudo));

		if (protocol == 17 && checksum == 0)
			checksum = 0xffff;
		put16(f + at, checksum);
	}
	return NULL;
}

const char *pb_check(const struct rte_mbuf *m, uint8_t *buffer, size_t size,
		     struct pb_view *v)
{
	uint32_t o = 12, l3, l4, length = m->pkt_len;
	const char *problem;
	uint16_t ethertype;

	memset(v, 0, sizeof(*v));
	uint32_t done = 0;

	if (length > size)
		return "packet larger than buffer";
	for (const struct rte_mbuf *s = m; s != NULL; s = s->next) {
		if (done + s->data_len > size)
			return "segments longer than pkt_len";
		memcpy(buffer + done, rte_pktmbuf_mtod(s, void *), s->data_len);
		done += s->data_len;
	}
	if (done != length)
		return "pkt_len differs from the sum of data_len";
	problem = apply_tx_offload(m, buffer, length);
	if (problem != NULL)
		return problem;
	v->frame = buffer;
	v->frame_length = length;
	if (length < 14)
		return "runt";
	ethertype = get16(buffer + o);
	if (ethertype == 0x8100) {
		o += 4;
		ethertype = get16(buffer + o);
	}
	o += 2;
	v->l2_length = (uint16_t)o;
	l3 = o;
	if (ethertype == 0x0800) {
		v->ip_version = 4;
		v->l3_length = (uint16_t)((buffer[l3] & 0xf) * 4);
		v->ip_length = get16(buffer + l3 + 2);
		v->tos = buffer[l3 + 1];
		v->ip_id = get16(buffer + l3 + 4);
		v->dont_fragment = (buffer[l3 + 6] & 0x40) != 0;
		v->ttl = buffer[l3 + 8];
		v->l4_protocol = buffer[l3 + 9];
		if (pb_fold(pb_sum(buffer + l3, v->l3_length, 0)) != 0xffff)
			return "bad IPv4 header checksum";
	} else if (ethertype == 0x86dd) {
		uint8_t next = buffer[l3 + 6];
		uint32_t e = l3 + 40;

		v->ip_version = 6;
		v->ip_length = 40u + get16(buffer + l3 + 4);
		v->tos = (uint8_t)(get32(buffer + l3) >> 20);
		v->ttl = buffer[l3 + 7];
		while (next == 60 || next == 0 || next == 43 || next == 44) {
			next = buffer[e];
			e += (buffer[e + 1] + 1u) * 8;
		}
		v->l3_length = (uint16_t)(e - l3);
		v->l4_protocol = next;
	} else {
		return "not IP";
	}
	if (l3 + v->ip_length > length)
		return "IP length beyond frame";
	if (l3 + v->ip_length != length)
		return "frame longer than IP length";
	l4 = l3 + v->l3_length;
	v->src_port = get16(buffer + l4);
	v->dst_port = get16(buffer + l4 + 2);
	uint32_t l4_length = v->ip_length - v->l3_length;

	if (v->l4_protocol == 6) {
		v->l4_length = (uint16_t)((buffer[l4 + 12] >> 4) * 4);
		v->seq = get32(buffer + l4 + 4);
		v->ack = get32(buffer + l4 + 8);
		v->tcp_flags = buffer[l4 + 13];
		v->window = get16(buffer + l4 + 14);
		v->l4_checksum = get16(buffer + l4 + 16);
	} else if (v->l4_protocol == 17) {
		v->l4_length = 8;
		v->l4_checksum = get16(buffer + l4 + 6);
		if (get16(buffer + l4 + 4) != l4_length)
			return "UDP length differs from IP length";
	} else {
		return "not TCP or UDP";
	}
	if (!(v->l4_protocol == 17 && v->ip_version == 4 &&
	      v->l4_checksum == 0) &&
	    pb_fold(l4_sum_with_pseudo(buffer + l3, v->ip_version,
				       v->l4_protocol, buffer + l4,
				       l4_length)) != 0xffff)
		return "bad L4 checksum";
	v->payload = buffer + l4 + v->l4_length;
	v->payload_length = l4_length - v->l4_length;
	return NULL;
}

struct rte_mempool *pb_pool(const char *name, unsigned int count,
			    uint16_t data_room)
{
	return rte_pktmbuf_pool_create(
		name, count, 0, 0, (uint16_t)(data_room + RTE_PKTMBUF_HEADROOM),
		SOCKET_ID_ANY);
}
