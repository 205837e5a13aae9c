/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The load generator of the port benchmarks (bench/switch_ports.py,
 * bench/nic_ports.py): sends the frames of a capture round-robin out of one
 * DPDK port as fast as the port takes them, counts what comes back on the
 * others, and prints one JSON line with the counts of the measured window
 * ("loops": how often the capture was sent over, warm-up included). It says
 * "measuring" and "measured" on stderr as the window opens and closes.
 *
 *   jumbogate-loadgen EAL... -- --pcap F --tx PORT
 *                               (--rx PORT[,PORT...] | --count-iface
 * IF[,IF...])
 *                               [--seconds S] [--warmup S]
 *                               [--advance-seq] [--packets N]
 *
 * Ports are DPDK port names (the vdev names). --count-iface counts what
 * Linux interfaces received instead (their kernel counters, read at the
 * window's edges): receiving through DPDK costs the generator a copy per
 * frame on the same cores as the forwarder, which would cap the offered
 * load at what one core both sends and receives. Every forwarder under test
 * (jumbogate-switch, jumbogate-nic, dpdk-testpmd, BMv2) sees the same frames
 * at the same offered load, from the same process, so their rates compare.
 * A frame the port refuses is offered again first in the next burst.
 *
 * Why the frames are sent without copying: each template buffer is sent
 * again with its reference count raised; a copying PMD (af_packet and
 * memif, the ones the benchmarks use) only reads it, so the generator's own
 * cost per frame is the PMD's.
 *
 * --advance-seq: the capture as the start of endless TCP streams. Sent
 * round-robin, the same segments come again every loop, which a merger
 * takes as retransmissions (jumbogate-nic merges only in-sequence data, so
 * it would stop merging after the first loop). With the option, every
 * loop moves each TCP flow's sequence numbers on by the bytes the flow
 * spans in the capture, and its IPv4 IDs by the flow's segments in it, so
 * loop n continues loop n-1 as the same connection would. The template's
 * headers are rewritten in place, checksums updated incrementally (RFC
 * 1624), just before the frame is sent in a new loop.
 *
 * --packets N stops after N frames were sent in the measured window
 * (a test's exact replay).
 */
#include <getopt.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#define BURST	   32
#define MAX_FRAMES 4096
#define MAX_RX	   4
#define POOL_MBUFS (MAX_FRAMES + 8192)
/* af_packet copies each ring frame into one buffer: the ring frames of the
 * benchmark (12288 bytes, as jumbogate-switch opens them) must fit. */
#define FRAME_LIMIT 12288

struct rx_port {
	uint16_t id;
	const char *name;
	bool kernel; /* a Linux interface's counters, not a DPDK port */
	uint64_t packets;
	uint64_t bytes;
};

/* What a loop changes in one template frame (--advance-seq). A frame
 * that is not TCP over IPv4 or IPv6 has steps of 0 and is sent as it is. */
struct advance {
	uint32_t seq_step; /* bytes its flow spans in the capture */
	uint16_t id_step;  /* segments of its flow (IPv4) */
	uint16_t l3;	   /* offsets of the IP and TCP headers */
	uint16_t l4;
	uint8_t ip_version; /* 0: left alone */
	uint32_t loop;	    /* the loop its headers are written for */
};

/* A TCP flow of the capture while the steps are worked out. */
struct flow {
	uint8_t ip_version;
	uint8_t addresses[32];
	uint16_t ports[2];
	uint32_t first_seq; /* offsets below are relative to it */
	int64_t low, high;  /* sequence space the flow covers */
	uint32_t segments;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: jumbogate-loadgen EAL... -- --pcap F --tx PORT "
		     "(--rx PORT[,PORT...] | --count-iface IF[,IF...]) "
		     "[--seconds S] [--warmup S] [--advance-seq] "
		     "[--packets N]\n");
}

static int fail(const char *what, const char *detail)
{
	fprintf(stderr, "jumbogate-loadgen: %s%s%s\n", what, detail ? ": " : "",
		detail ? detail : "");
	return 1;
}

static bool find_port(const char *name, uint16_t *id)
{
	if (rte_eth_dev_get_port_by_name(name, id) == 0)
		return true;
	fprintf(stderr, "jumbogate-loadgen: no DPDK port '%s'\n", name);
	return false;
}

/* The data room of the generator's buffers. net_af_xdp hands each buffer
 * of its port's pool to the kernel as one frame of the socket's memory, a
 * page at most: on such a port the buffers are DPDK's default (2 KB of
 * data), which holds a 1500-byte MTU's frames. */
static uint16_t data_room_for(uint16_t tx_id)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(tx_id, &info) == 0 &&
	    strcmp(info.driver_name, "net_af_xdp") == 0)
		return RTE_MBUF_DEFAULT_DATAROOM;
	return FRAME_LIMIT;
}

static bool start_port(uint16_t id, struct rte_mempool *pool)
{
	struct rte_eth_conf conf = {0};

	if (rte_eth_dev_configure(id, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(id, 0, 1024, rte_eth_dev_socket_id(id), NULL,
				   pool) < 0 ||
	    rte_eth_tx_queue_setup(id, 0, 1024, rte_eth_dev_socket_id(id),
				   NULL) < 0 ||
	    rte_eth_dev_start(id) < 0)
		return false;
	rte_eth_promiscuous_enable(id);
	return true;
}

/* The capture's frames, each in one template buffer. */
static int load_frames(const char *path, struct rte_mempool *pool,
		       struct rte_mbuf **frames)
{
	char error[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *header;
	const u_char *data;
	pcap_t *pcap = pcap_open_offline(path, error);
	int count = 0;

	if (!pcap) {
		fail("cannot read the capture", error);
		return -1;
	}
	while (count < MAX_FRAMES && pcap_next_ex(pcap, &header, &data) == 1) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		char *to;

		if (header->caplen != header->len ||
		    header->caplen > rte_pktmbuf_tailroom(m)) {
			fprintf(stderr,
				"jumbogate-loadgen: frame %d of %s is cut or "
				"longer than a buffer (%u bytes)\n",
				count + 1, path, header->len);
			rte_pktmbuf_free(m);
			pcap_close(pcap);
			return -1;
		}
		to = rte_pktmbuf_append(m, (uint16_t)header->caplen);
		memcpy(to, data, header->caplen);
		frames[count++] = m;
	}
	pcap_close(pcap);
	if (count == 0)
		fail("the capture has no frames", path);
	return count == 0 ? -1 : count;
}

/* Where the IP and TCP headers of a frame start, and its TCP payload
 * length; false for anything else (then it is never rewritten). */
static bool locate_tcp(const struct rte_mbuf *m, struct advance *a,
		       uint32_t *payload)
{
	const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t length = rte_pktmbuf_data_len(m), l3 = RTE_ETHER_HDR_LEN;
	const struct rte_tcp_hdr *tcp;
	uint32_t ip_bytes, l4, tcp_bytes;
	uint16_t type;

	if (length < RTE_ETHER_HDR_LEN)
		return false;
	type = (uint16_t)(frame[12] << 8 | frame[13]);
	while (type == RTE_ETHER_TYPE_VLAN || type == RTE_ETHER_TYPE_QINQ) {
		if (length < l3 + 4)
			return false;
		type = (uint16_t)(frame[l3 + 2] << 8 | frame[l3 + 3]);
		l3 += 4;
	}
	if (type == RTE_ETHER_TYPE_IPV4) {
		const struct rte_ipv4_hdr *ip = (const void *)(frame + l3);

		if (length < l3 + sizeof(*ip) ||
		    ip->next_proto_id != IPPROTO_TCP ||
		    (rte_be_to_cpu_16(ip->fragment_offset) &
		     (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0)
			return false;
		l4 = l3 + rte_ipv4_hdr_len(ip);
		ip_bytes = rte_be_to_cpu_16(ip->total_length);
		a->ip_version = 4;
	} else if (type == RTE_ETHER_TYPE_IPV6) {
		const struct rte_ipv6_hdr *ip = (const void *)(frame + l3);

		/* Extension headers are rare in TCP traffic; such frames
		 * are left alone rather than walked. */
		if (length < l3 + sizeof(*ip) || ip->proto != IPPROTO_TCP)
			return false;
		l4 = l3 + (uint32_t)sizeof(*ip);
		ip_bytes = (uint32_t)sizeof(*ip) +
			   rte_be_to_cpu_16(ip->payload_len);
		a->ip_version = 6;
	} else {
		return false;
	}
	if (length < l4 + sizeof(struct rte_tcp_hdr) || l3 + ip_bytes > length)
		return false;
	tcp = (const void *)(frame + l4);
	tcp_bytes = (uint32_t)(tcp->data_off >> 4) * 4;
	if (tcp_bytes < sizeof(*tcp) || l4 + tcp_bytes > l3 + ip_bytes)
		return false;
	*payload = l3 + ip_bytes - l4 - tcp_bytes;
	/* SYN and FIN take a sequence number each. */
	*payload += (tcp->tcp_flags & RTE_TCP_SYN_FLAG) ? 1 : 0;
	*payload += (tcp->tcp_flags & RTE_TCP_FIN_FLAG) ? 1 : 0;
	a->l3 = (uint16_t)l3;
	a->l4 = (uint16_t)l4;
	return true;
}

static void flow_of(const struct rte_mbuf *m, const struct advance *a,
		    struct flow *f)
{
	const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_tcp_hdr *tcp = (const void *)(frame + a->l4);

	memset(f, 0, sizeof(*f));
	f->ip_version = a->ip_version;
	if (a->ip_version == 4)
		memcpy(f->addresses, frame + a->l3 + 12, 8);
	else
		memcpy(f->addresses, frame + a->l3 + 8, 32);
	f->ports[0] = tcp->src_port;
	f->ports[1] = tcp->dst_port;
}

static bool same_flow(const struct flow *a, const struct flow *b)
{
	return a->ip_version == b->ip_version && a->ports[0] == b->ports[0] &&
	       a->ports[1] == b->ports[1] &&
	       memcmp(a->addresses, b->addresses, sizeof(a->addresses)) == 0;
}

/* Each frame's steps: its flow's span of sequence space and its number of
 * segments in the capture. A flow's sequence numbers are taken relative to
 * its first segment's, so a capture that crosses 2^32 (or holds a segment
 * sent before the first one seen) still spans the right amount. Returns
 * the number of TCP flows. */
static int plan_advance(struct rte_mbuf **frames, int count,
			struct advance *plan)
{
	static struct flow flows[MAX_FRAMES];
	static int flow_index[MAX_FRAMES];
	int flow_count = 0;

	for (int i = 0; i < count; i++) {
		struct advance *a = &plan[i];
		const struct rte_tcp_hdr *tcp;
		struct flow key;
		uint32_t payload;
		int64_t start;
		int f;

		memset(a, 0, sizeof(*a));
		flow_index[i] = -1;
		if (!locate_tcp(frames[i], a, &payload)) {
			a->ip_version = 0;
			continue;
		}
		tcp = rte_pktmbuf_mtod_offset(
			frames[i], const struct rte_tcp_hdr *, a->l4);
		flow_of(frames[i], a, &key);
		/* Linear: captures hold at most MAX_FRAMES frames and this
		 * runs once, before the measurement. */
		for (f = 0; f < flow_count; f++)
			if (same_flow(&flows[f], &key))
				break;
		if (f == flow_count) {
			flows[f] = key;
			flows[f].first_seq = rte_be_to_cpu_32(tcp->sent_seq);
			flows[f].low = flows[f].high = 0;
			flow_count++;
		}
		start = (int32_t)(rte_be_to_cpu_32(tcp->sent_seq) -
				  flows[f].first_seq);
		if (start < flows[f].low)
			flows[f].low = start;
		if (start + payload > flows[f].high)
			flows[f].high = start + payload;
		flows[f].segments++;
		flow_index[i] = f;
	}
	for (int i = 0; i < count; i++) {
		const struct flow *f;

		if (flow_index[i] < 0)
			continue;
		f = &flows[flow_index[i]];
		plan[i].seq_step = (uint32_t)(f->high - f->low);
		plan[i].id_step =
			plan[i].ip_version == 4 ? (uint16_t)f->segments : 0;
	}
	return flow_count;
}

/* RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), on 16-bit words as they lie
 * in the frame (the one's-complement sum does not care about byte order
 * as long as every word is taken the same way). */
static rte_be16_t checksum_replace(rte_be16_t checksum, rte_be16_t old,
				   rte_be16_t new)
{
	uint32_t sum = (uint16_t)~checksum;

	sum += (uint16_t)~old;
	sum += new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (rte_be16_t)~sum;
}

/* A 32-bit field replaced: two words of the sum. */
static rte_be16_t checksum_replace32(rte_be16_t checksum, rte_be32_t old,
				     rte_be32_t new)
{
	rte_be16_t old_words[2], new_words[2];

	memcpy(old_words, &old, 4);
	memcpy(new_words, &new, 4);
	checksum = checksum_replace(checksum, old_words[0], new_words[0]);
	return checksum_replace(checksum, old_words[1], new_words[1]);
}

/* Rewrite a template frame for loop `loop`: its sequence number (and
 * IPv4 ID) moved on by its steps for every loop since it was last
 * written. */
static void advance_frame(struct rte_mbuf *m, struct advance *a, uint32_t loop)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_tcp_hdr *tcp = (void *)(frame + a->l4);
	uint32_t loops = loop - a->loop;
	rte_be32_t old_seq = tcp->sent_seq;

	a->loop = loop;
	if (a->ip_version == 0 || loops == 0)
		return;
	tcp->sent_seq = rte_cpu_to_be_32(rte_be_to_cpu_32(old_seq) +
					 loops * a->seq_step);
	tcp->cksum = checksum_replace32(tcp->cksum, old_seq, tcp->sent_seq);
	if (a->ip_version == 4 && a->id_step != 0) {
		struct rte_ipv4_hdr *ip = (void *)(frame + a->l3);
		rte_be16_t old = ip->packet_id;

		ip->packet_id = rte_cpu_to_be_16(
			(uint16_t)(rte_be_to_cpu_16(old) + loops * a->id_step));
		ip->hdr_checksum =
			checksum_replace(ip->hdr_checksum, old, ip->packet_id);
	}
}

static uint64_t kernel_counter(const char *iface, const char *name)
{
	char path[256];
	unsigned long long value = 0;
	FILE *file;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", iface,
		 name);
	file = fopen(path, "r");
	if (file) {
		if (fscanf(file, "%llu", &value) != 1)
			value = 0;
		fclose(file);
	}
	return value;
}

/* Kernel-counted ports: counters go negative at the window's start and
 * positive at its end, leaving the window's difference. */
static void add_kernel_counts(struct rx_port *ports, int count, int sign)
{
	for (int i = 0; i < count; i++) {
		if (!ports[i].kernel)
			continue;
		ports[i].packets += (uint64_t)sign *
				    kernel_counter(ports[i].name, "rx_packets");
		ports[i].bytes += (uint64_t)sign *
				  kernel_counter(ports[i].name, "rx_bytes");
	}
}

static void drain(struct rx_port *ports, int count, bool counting)
{
	struct rte_mbuf *burst[BURST];

	for (int i = 0; i < count; i++) {
		uint16_t got;

		if (ports[i].kernel)
			continue;
		got = rte_eth_rx_burst(ports[i].id, 0, burst, BURST);

		for (uint16_t j = 0; j < got; j++) {
			if (counting) {
				ports[i].packets++;
				ports[i].bytes += burst[j]->pkt_len;
			}
			rte_pktmbuf_free(burst[j]);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"pcap", required_argument, NULL, 'p'},
		{"tx", required_argument, NULL, 't'},
		{"rx", required_argument, NULL, 'r'},
		{"count-iface", required_argument, NULL, 'k'},
		{"seconds", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, 'w'},
		{"advance-seq", no_argument, NULL, 'a'},
		{"packets", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static struct advance plan[MAX_FRAMES];
	struct rte_mbuf *frames[MAX_FRAMES];
	struct rx_port rx[MAX_RX];
	const char *pcap_path = NULL, *tx_name = NULL;
	char *rx_names = NULL;
	bool rx_kernel = false;
	double seconds = 2.0, warmup = 0.5;
	int rx_count = 0, frame_count, next = 0, option, eal;
	uint64_t sent = 0, sent_bytes = 0, refused = 0, hz, start, end;
	uint64_t limit = 0;
	uint32_t loop = 0;
	struct rte_mempool *pool;
	uint16_t tx_id;
	bool counting = false, advance = false;

	eal = rte_eal_init(argc, argv);
	if (eal < 0)
		return fail("the EAL did not start", NULL);
	argc -= eal;
	argv += eal;
	while ((option = getopt_long(argc, argv, "", long_options, NULL)) !=
	       -1) {
		switch (option) {
		case 'p':
			pcap_path = optarg;
			break;
		case 't':
			tx_name = optarg;
			break;
		case 'r':
		case 'k':
			if (rx_names) {
				usage(stderr);
				return 2;
			}
			rx_names = optarg;
			rx_kernel = option == 'k';
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'a':
			advance = true;
			break;
		case 'n':
			limit = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!pcap_path || !tx_name || !rx_names || seconds <= 0 || warmup < 0) {
		usage(stderr);
		return 2;
	}

	if (!find_port(tx_name, &tx_id))
		return fail("no transmit port", tx_name);
	pool = rte_pktmbuf_pool_create(
		"loadgen", POOL_MBUFS, 256, 0,
		data_room_for(tx_id) + RTE_PKTMBUF_HEADROOM, rte_socket_id());
	if (!pool)
		return fail("no buffer pool", rte_strerror(rte_errno));
	if (!start_port(tx_id, pool))
		return fail("cannot start the transmit port", tx_name);
	for (char *name = strtok(rx_names, ","); name;
	     name = strtok(NULL, ",")) {
		if (rx_count == MAX_RX)
			return fail("too many receive ports", name);
		rx[rx_count].name = name;
		rx[rx_count].kernel = rx_kernel;
		rx[rx_count].packets = rx[rx_count].bytes = 0;
		if (rx_kernel) {
			rx_count++;
			continue;
		}
		if (!find_port(name, &rx[rx_count].id))
			return 1;
		if (rx[rx_count].id != tx_id &&
		    !start_port(rx[rx_count].id, pool))
			return fail("cannot start a receive port", name);
		rx_count++;
	}
	frame_count = load_frames(pcap_path, pool, frames);
	if (frame_count < 0)
		return 1;
	if (advance)
		fprintf(stderr,
			"jumbogate-loadgen: %d TCP flows advance every loop\n",
			plan_advance(frames, frame_count, plan));
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	hz = rte_get_tsc_hz();
	start = rte_get_tsc_cycles() + (uint64_t)(warmup * (double)hz);
	end = start + (uint64_t)(seconds * (double)hz);
	for (uint64_t now = rte_get_tsc_cycles();
	     !stop && now < end && !(limit && sent >= limit);
	     now = rte_get_tsc_cycles()) {
		struct rte_mbuf *burst[BURST];
		uint16_t taken, filled = 0, room = BURST;
		uint32_t at_loop = loop;
		int at = next;

		if (!counting && now >= start) {
			counting = true;
			for (int i = 0; i < rx_count; i++)
				rx[i].packets = rx[i].bytes = 0;
			add_kernel_counts(rx, rx_count, -1);
			/* For whoever reads a forwarder's counters at the
			 * window's edges (stderr is unbuffered). */
			fprintf(stderr, "jumbogate-loadgen: measuring\n");
		}
		if (limit && counting && limit - sent < room)
			room = (uint16_t)(limit - sent);
		while (filled < room) {
			struct rte_mbuf *m = frames[at];

			/*
			 * A template is rewritten only while nobody else
			 * holds it. A copying PMD (af_packet, memif) has
			 * copied the frame and dropped its reference
			 * before tx_burst returns, so the count is back at
			 * 1 long before the frame's turn comes again; a
			 * PMD that sends from the buffer later (a NIC's
			 * DMA) still holds it until its transmission
			 * completes, and the burst ends here until then,
			 * so no frame on the wire is changed under it.
			 */
			if (advance && plan[at].loop != at_loop) {
				if (rte_mbuf_refcnt_read(m) != 1)
					break;
				advance_frame(m, &plan[at], at_loop);
			}
			rte_mbuf_refcnt_update(m, 1);
			burst[filled++] = m;
			if (++at == frame_count) {
				at = 0;
				at_loop++;
				/* One loop per burst, so that no template
				 * is rewritten while an earlier send of it
				 * waits in the same burst. */
				if (advance)
					break;
			}
		}
		taken = rte_eth_tx_burst(tx_id, 0, burst, filled);
		if (counting) {
			sent += taken;
			refused += filled - taken;
			for (uint16_t i = 0; i < taken; i++)
				sent_bytes += burst[i]->pkt_len;
		}
		for (uint16_t i = taken; i < filled; i++)
			rte_mbuf_refcnt_update(burst[i], -1);
		/* What the port refused goes first next time: skipped, it
		 * would leave a hole in its flow's sequence. */
		for (uint16_t i = 0; i < taken; i++)
			if (++next == frame_count) {
				next = 0;
				loop++;
			}
		drain(rx, rx_count, counting);
	}
	fprintf(stderr, "jumbogate-loadgen: measured\n");
	/* What was sent in the window and is still on its way. */
	for (uint64_t until = rte_get_tsc_cycles() + hz / 5;
	     rte_get_tsc_cycles() < until;)
		drain(rx, rx_count, counting);
	add_kernel_counts(rx, rx_count, 1);

	printf("{\"seconds\": %.3f, \"frames\": %d, \"sent\": %" PRIu64
	       ", \"sent_bytes\": %" PRIu64 ", \"refused\": %" PRIu64
	       ", \"loops\": %" PRIu32 ", \"received\": {",
	       seconds, frame_count, sent, sent_bytes, refused, loop);
	for (int i = 0; i < rx_count; i++)
		printf("%s\"%s\": {\"packets\": %" PRIu64
		       ", \"bytes\": %" PRIu64 "}",
		       i ? ", " : "", rx[i].name, rx[i].packets, rx[i].bytes);
	printf("}}\n");
	for (int i = 0; i < frame_count; i++)
		rte_pktmbuf_free(frames[i]);
	rte_eth_dev_stop(tx_id);
	for (int i = 0; i < rx_count; i++)
		if (!rx[i].kernel && rx[i].id != tx_id)
			rte_eth_dev_stop(rx[i].id);
	rte_eal_cleanup();
	return 0;
}
