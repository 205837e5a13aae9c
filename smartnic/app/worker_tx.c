/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's sending side: a port gets what it can take (one buffer per
 * packet where it cannot send chains, rte_eth_tx_prepare's fix-ups), and
 * what it refuses or never takes is dropped and counted, never left to
 * stall the queue.
 */
#include <string.h>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "nic.h"
#include "worker_internal.h"

/* A send that makes no progress this many times drops the rest. */
#define TX_MAX_STALLS 1000

/* One buffer holding all of m (for ports without MULTI_SEGS), or NULL. The
 * first buffer of a merged chain is often a small header copy, so when it
 * has no room for the rest the bytes go to a buffer of the chain's largest
 * pool. A split segment is a header copy and an indirect buffer, both from
 * the small header pool: the pool that counts for an indirect buffer is
 * that of the received buffer it points into. */
static struct rte_mbuf *flatten(struct rte_mbuf *m)
{
	struct rte_mempool *pool = NULL;
	struct rte_mbuf *copy;
	uint16_t room = 0;

	if (m->nb_segs == 1 || rte_pktmbuf_linearize(m) == 0)
		return m;
	for (struct rte_mbuf *seg = m; seg != NULL; seg = seg->next) {
		struct rte_mempool *candidate =
			RTE_MBUF_CLONED(seg) ? rte_mbuf_from_indirect(seg)->pool
					     : seg->pool;
		uint16_t data_room = rte_pktmbuf_data_room_size(candidate);

		if (data_room > room) {
			room = data_room;
			pool = candidate;
		}
	}
	if (room < RTE_PKTMBUF_HEADROOM + m->pkt_len ||
	    (copy = rte_pktmbuf_alloc(pool)) == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	rte_pktmbuf_read(m, 0, m->pkt_len,
			 rte_pktmbuf_append(copy, (uint16_t)m->pkt_len));
	copy->ol_flags = m->ol_flags;
	copy->l2_len = m->l2_len;
	copy->l3_len = m->l3_len;
	copy->l4_len = m->l4_len;
	rte_pktmbuf_free(m);
	return copy;
}

static const struct nic_port *served_port(uint16_t port_id)
{
	for (unsigned int p = 0; p < nic_instance->port_count; p++)
		if (nic_instance->ports[p].port_id == port_id)
			return &nic_instance->ports[p];
	return NULL;
}

/* Whether m's IP packet is larger than mtu. Only a frame longer than an
 * untagged one of mtu can be, so the Ethernet header is read (through the
 * chain: its first buffer may be a small header copy) only then. */
static bool over_mtu(const struct rte_mbuf *m, uint32_t mtu)
{
	uint32_t l2_len = RTE_ETHER_HDR_LEN;

	if (m->pkt_len <= mtu + RTE_ETHER_HDR_LEN)
		return false;
	for (int tags = 0; tags < 2; tags++) {
		uint16_t buffer, type;
		const void *at = rte_pktmbuf_read(m, l2_len - sizeof(type),
						  sizeof(type), &buffer);

		if (at == NULL)
			break;
		memcpy(&type, at, sizeof(type));
		if (type != rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) &&
		    type != rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ))
			break;
		l2_len += RTE_VLAN_HLEN;
	}
	return m->pkt_len > mtu + l2_len;
}

/* rte_eth_tx_prepare: what the port needs done to a packet before it
 * takes it (offload fix-ups, chain and size limits). A packet the port
 * refuses is dropped and counted as tx-failed, not handed over to be
 * mangled or to stall the queue. */
static void prepare(struct nic_worker *worker, struct output *out)
{
	const struct nic_port *port = served_port(out->port_id);
	uint16_t done = 0;

	/* What the port's MTU cannot carry is dropped here, counted, rather
	 * than left to the device, which may cut it, refuse it without a
	 * count, or send a frame the next hop drops: only a port of its own
	 * smaller MTU (--port-mtu NAME=BYTES) can receive a packet built for
	 * another. */
	if (port != NULL) {
		uint16_t kept = 0;

		for (uint16_t i = 0; i < out->count; i++) {
			if (!over_mtu(out->pkts[i], port->mtu)) {
				out->pkts[kept++] = out->pkts[i];
				continue;
			}
			rte_pktmbuf_free(out->pkts[i]);
			worker->counters.drops[NIC_DROP_OVER_PORT_MTU]++;
		}
		out->count = kept;
	}
	if (port != NULL && port->flatten_chains) {
		uint16_t kept = 0;

		for (uint16_t i = 0; i < out->count; i++) {
			struct rte_mbuf *m = flatten(out->pkts[i]);

			if (m != NULL)
				out->pkts[kept++] = m;
			else
				worker->counters.drops[NIC_DROP_TX_FAILED]++;
		}
		out->count = kept;
	}
	while (done < out->count) {
		done += rte_eth_tx_prepare(out->port_id, worker->queue_id,
					   out->pkts + done, out->count - done);
		if (done == out->count)
			break;
		rte_pktmbuf_free(out->pkts[done]);
		worker->counters.drops[NIC_DROP_TX_FAILED]++;
		memmove(out->pkts + done, out->pkts + done + 1,
			(out->count - done - 1) * sizeof(out->pkts[0]));
		out->count--;
	}
}

void worker_transmit(struct nic_worker *worker, struct output *out)
{
	uint32_t lengths[OUTPUT_CAPACITY];
	uint16_t sent = 0;
	unsigned int stalls = 0;

	prepare(worker, out);
	/* The port frees what it sent, so lengths are read before. */
	for (uint16_t i = 0; i < out->count; i++)
		lengths[i] = rte_pktmbuf_pkt_len(out->pkts[i]);
	while (sent < out->count && stalls < TX_MAX_STALLS) {
		uint16_t now_sent =
			rte_eth_tx_burst(out->port_id, worker->queue_id,
					 out->pkts + sent, out->count - sent);
		if (now_sent == 0) {
			stalls++;
			rte_pause();
		}
		for (uint16_t i = sent; i < sent + now_sent; i++)
			worker->counters.tx_bytes += lengths[i];
		sent += now_sent;
	}
	worker->counters.tx_packets += sent;
	if (sent < out->count) {
		worker->counters.drops[NIC_DROP_TX_FAILED] += out->count - sent;
		rte_pktmbuf_free_bulk(out->pkts + sent, out->count - sent);
	}
	out->count = 0;
}

uint16_t worker_reserve(struct nic_worker *worker, struct output *out,
			uint16_t needed)
{
	if (OUTPUT_CAPACITY - out->count < needed)
		worker_transmit(worker, out);
	return OUTPUT_CAPACITY - out->count;
}

void worker_emit(struct nic_worker *worker, struct output *out,
		 struct rte_mbuf **pkts, uint16_t count)
{
	for (uint16_t i = 0; i < count; i++) {
		if (out->count == OUTPUT_CAPACITY)
			worker_transmit(worker, out);
		out->pkts[out->count++] = pkts[i];
	}
}
