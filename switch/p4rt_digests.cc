// SPDX-License-Identifier: Apache-2.0
// The P4Runtime server's packet I/O and digests, and the control loop
// that sends them (with idle timeouts).
#include "p4rt_server.h"

namespace p4rt_server
{

// What is wrong with a packet-out's metadata, empty when nothing is
// (P4Runtime's "PacketOut": precisely one metadata for each field of the
// P4Info's packet-out controller header, each a bytestring of its
// bitwidth). The specification has such a packet-out dropped, with a
// stream error where the server gives one.
static std::string metadata_error(const Schema &schema,
				  const p4v1::PacketOut &packet)
{
	std::set<uint32_t> seen;
	for (const auto &m : packet.metadata()) {
		const std::string id = std::to_string(m.metadata_id());
		auto field = schema.packet_out_metadata.find(m.metadata_id());
		if (field == schema.packet_out_metadata.end())
			return "unknown packet-out metadata id " + id +
			       (schema.packet_out_metadata.empty()
					? ": the P4Info has no packet-out "
					  "controller header, so a "
					  "packet-out carries no metadata"
					: "");
		if (!seen.insert(m.metadata_id()).second)
			return "packet-out metadata " + field->second.name +
			       " (id " + id + ") given twice";
		const std::string &value = m.value();
		if (value.empty())
			return "packet-out metadata " + field->second.name +
			       " (id " + id + ") is empty";
		// Leading zero bytes are allowed (P4Runtime "Bytestrings").
		size_t first = value.find_first_not_of('\0');
		int bits = 0;
		if (first != std::string::npos)
			bits = (int)(8 * (value.size() - first) - 8) + 32 -
			       __builtin_clz((unsigned char)value[first]);
		if (field->second.bitwidth > 0 && bits > field->second.bitwidth)
			return "packet-out metadata " + field->second.name +
			       " (id " + id + ") does not fit in " +
			       std::to_string(field->second.bitwidth) + " bits";
	}
	for (const auto &[id, field] : schema.packet_out_metadata)
		if (!seen.count(id))
			return "packet-out metadata " + field.name + " (id " +
			       std::to_string(id) + ") is missing";
	return "";
}

void Server::packet_out(Stream *stream, const p4v1::PacketOut &packet)
{
	// Every packet-out that is not sent is answered with the packet and
	// counted (packet_outs_refused).
	auto refuse = [&](StatusCode code, const std::string &why) {
		g_packet_outs_refused++;
		stream_error(stream, code, why, &packet);
	};
	{
		std::lock_guard<std::mutex> lock(mu_);
		if (primary_of(stream->role) != stream) {
			refuse(StatusCode::PERMISSION_DENIED,
			       "packet-out from a client that is not primary");
			return;
		}
		if (!may_packet_out(stream)) {
			refuse(StatusCode::PERMISSION_DENIED,
			       "packet-out from role '" + stream->role +
				       "', whose config does not take part "
				       "in packet I/O (receives_packet_ins)");
			return;
		}
	}
	// schema_ is the built-in P4Info's, fixed from the start.
	std::string why = metadata_error(schema_, packet);
	if (!why.empty()) {
		refuse(StatusCode::INVALID_ARGUMENT, why);
		return;
	}
	const std::string &payload = packet.payload();
	rte_mbuf *mbuf = rte_pktmbuf_alloc(sw_->packet_out_pool);
	if (mbuf == nullptr) {
		refuse(StatusCode::RESOURCE_EXHAUSTED,
		       "no buffer for the packet");
		return;
	}
	if (payload.size() < 14 ||
	    payload.size() > rte_pktmbuf_tailroom(mbuf)) {
		rte_pktmbuf_free(mbuf);
		refuse(StatusCode::INVALID_ARGUMENT,
		       "a packet-out must be an Ethernet frame of at most "
		       "the buffer size");
		return;
	}
	std::memcpy(rte_pktmbuf_append(mbuf, (uint16_t)payload.size()),
		    payload.data(), payload.size());
	if (rte_ring_mp_enqueue(sw_->packet_out, mbuf) != 0) {
		rte_pktmbuf_free(mbuf);
		refuse(StatusCode::RESOURCE_EXHAUSTED, "packet-out queue full");
	}
}

void Server::digest_ack(Stream *stream, const p4v1::DigestListAck &ack)
{
	std::lock_guard<std::mutex> lock(mu_);
	if (ack.digest_id() != schema_.elephant_digest) {
		// The error carries the ack (StreamError's
		// digest_list_ack), so the client knows which one.
		stream_error(stream, StatusCode::INVALID_ARGUMENT,
			     "ack for an unknown digest id " +
				     std::to_string(ack.digest_id()),
			     nullptr, &ack);
		return;
	}
	auto found = outstanding_.find(ack.list_id());
	if (found == outstanding_.end())
		return; // already expired; acks are idempotent
	for (const auto &item : found->second.items)
		recent_.erase(item);
	outstanding_.erase(found);
}

// elephant_digest_t's members, each where the compile puts it and no wider
// than the C struct holds it.
#define DIGEST(member) P4_DIGEST_ELEPHANT_DIGEST_##member
#define FITS(member, field)                                                    \
	static_assert(                                                         \
		DIGEST(member##_BITS) <=                                       \
			8 * sizeof(((sw_elephant_digest *)nullptr)->field),    \
		"elephant_digest_t's " #field " is wider than the C's")
FITS(IP_VERSION, ip_version);
FITS(SRC_ADDR, src_addr);
FITS(DST_ADDR, dst_addr);
FITS(PROTOCOL, protocol);
FITS(SRC_PORT, src_port);
FITS(DST_PORT, dst_port);
FITS(ESTIMATED_BYTES, estimated_bytes);

p4v1::P4Data Server::encode_digest(const sw_elephant_digest &d) const
{
	auto address = [](const uint8_t *bytes, size_t n) {
		Bits bits;
		std::memcpy(bits.b + sizeof(bits.b) - n, bytes, n);
		return canonical(bits);
	};
	std::string m[DIGEST(MEMBERS)];
	m[DIGEST(IP_VERSION_INDEX)] = canonical_u64(d.ip_version);
	m[DIGEST(SRC_ADDR_INDEX)] = address(d.src_addr, sizeof(d.src_addr));
	m[DIGEST(DST_ADDR_INDEX)] = address(d.dst_addr, sizeof(d.dst_addr));
	m[DIGEST(PROTOCOL_INDEX)] = canonical_u64(d.protocol);
	m[DIGEST(SRC_PORT_INDEX)] = canonical_u64(d.src_port);
	m[DIGEST(DST_PORT_INDEX)] = canonical_u64(d.dst_port);
	m[DIGEST(ESTIMATED_BYTES_INDEX)] = canonical_u64(d.estimated_bytes);
	p4v1::P4Data data;
	for (const auto &bits : m)
		data.mutable_struct_()->add_members()->set_bitstring(bits);
	return data;
}

// Caller holds mu_.
void Server::flush_digests(uint64_t now, bool force)
{
	if (pending_.empty())
		return;
	if (!digest_config_) {
		g_digests_dropped += pending_.size();
		pending_.clear();
		return;
	}
	const auto &config = digest_config_->config;
	uint64_t oldest = pending_.front().second;
	const size_t limit = digest_list_limit();
	if (!force && pending_.size() < limit &&
	    now - oldest < (uint64_t)config.max_timeout_ns())
		return;
	Stream *primary = primary_of("");
	while (!pending_.empty()) {
		p4v1::StreamMessageResponse message;
		auto *list = message.mutable_digest();
		list->set_digest_id(schema_.elephant_digest);
		list->set_list_id(++next_list_id_);
		list->set_timestamp((int64_t)now);
		Outstanding record{{}, now};
		while (!pending_.empty() && (size_t)list->data_size() < limit) {
			*list->add_data() =
				encode_digest(pending_.front().first);
			record.items.push_back(list->data(list->data_size() - 1)
						       .SerializeAsString());
			pending_.pop_front();
		}
		if (primary == nullptr) {
			g_digests_dropped += list->data_size();
			continue;
		}
		// A list the primary's outbox had no room for was never
		// sent: its digests are dropped, and nothing of it waits
		// for an ack.
		if (!primary->send(message)) {
			g_digests_dropped += list->data_size();
			continue;
		}
		if (config.ack_timeout_ns() > 0) {
			for (const auto &item : record.items)
				recent_.insert(item);
			outstanding_[list->list_id()] = record;
		}
	}
}

// Caller holds mu_. The most digests one list carries, and so the most
// the server holds before it sends them.
size_t Server::digest_list_limit() const
{
	int32_t size =
		digest_config_ ? digest_config_->config.max_list_size() : 0;
	return size > 0 ? (size_t)size
			: (size_t)p4rt_bounds::kMaxDigestListSize;
}

// Caller holds mu_. Drops what an unacknowledged list already carried
// (P4Runtime 16.2: no re-send before ack_timeout_ns).
bool Server::recently_sent(const sw_elephant_digest &d) const
{
	if (recent_.empty())
		return false;
	return recent_.count(encode_digest(d).SerializeAsString()) > 0;
}

// Caller holds mu_. The digest's state kept under its config, dropped
// with the config (a DELETE, a new pipeline): the digests pending for a
// list (dropped, and counted), and the lists sent and not acknowledged
// with the digests they carried (the specification's cache): none is
// held back as recently sent once the config is gone, and an ack for one
// of those lists finds nothing, as an ack after ack_timeout_ns does.
void Server::forget_digests()
{
	g_digests_dropped += pending_.size();
	pending_.clear();
	outstanding_.clear();
	recent_.clear();
}

void Server::expire_outstanding(uint64_t now)
{
	if (!digest_config_)
		return;
	uint64_t timeout = digest_config_->config.ack_timeout_ns();
	for (auto it = outstanding_.begin(); it != outstanding_.end();) {
		if (now - it->second.sent_ns >= timeout ||
		    recent_.size() > kDigestMemory) {
			for (const auto &item : it->second.items)
				recent_.erase(item);
			it = outstanding_.erase(it);
		} else {
			++it;
		}
	}
}

void Server::control_loop()
{
	uint64_t last_idle_scan = 0;
	while (!stopping_) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		close_late_streams();
		uint64_t now = sw_now_ns();
		drain_packet_in();
		std::lock_guard<std::mutex> lock(mu_);
		sw_elephant_digest d;
		while (rte_ring_sc_dequeue_elem(sw_->digests, &d, sizeof(d)) ==
		       0) {
			// Without a config nothing is remembered as sent:
			// every digest is queued, and dropped and counted
			// by flush_digests.
			if (digest_config_ && recently_sent(d))
				continue;
			pending_.emplace_back(d, now);
			if (pending_.size() >= digest_list_limit())
				flush_digests(now, false);
		}
		flush_digests(now, false);
		expire_outstanding(now);
		if (now - last_idle_scan >= 50 * 1000 * 1000ull) {
			last_idle_scan = now;
			scan_idle(now);
		}
	}
}

void Server::drain_packet_in()
{
	void *mbufs[32];
	unsigned int n;
	while ((n = rte_ring_sc_dequeue_burst(sw_->packet_in, mbufs, 32,
					      nullptr)) > 0) {
		for (unsigned int i = 0; i < n; i++) {
			auto *mbuf = static_cast<rte_mbuf *>(mbufs[i]);
			// rte_pktmbuf_read copies only a segmented
			// packet: for a contiguous one it answers a
			// pointer into the mbuf and leaves `copy` as
			// it was.
			uint32_t length = rte_pktmbuf_pkt_len(mbuf);
			std::string copy(length, '\0');
			const void *bytes =
				rte_pktmbuf_read(mbuf, 0, length, copy.data());
			if (bytes != nullptr) {
				p4v1::StreamMessageResponse message;
				message.mutable_packet()->set_payload(bytes,
								      length);
				// The primaries of the roles that take
				// it, the default role's among them.
				std::lock_guard<std::mutex> lock(mu_);
				send_packet_in(message);
			}
			rte_pktmbuf_free(mbuf);
		}
	}
}

// Caller holds mu_.
void Server::scan_idle(uint64_t now)
{
	Stream *primary = primary_of("");
	// While the primary's last notification waits in its outbox (a
	// controller that reads slowly, or not at all) no other is made: the
	// entries are left unreported, so the scan after it is written
	// reports every entry still idle, and a primary that stopped reading
	// holds one notification, not one every scan.
	if (primary != nullptr && primary->idle_notification_waiting())
		return;
	const TableInfo *flows = schema_.table(P4_TABLE_MERGE_FLOWS);
	auto &entries = entries_[flows->id];
	p4v1::StreamMessageResponse message;
	auto *notification = message.mutable_idle_timeout_notification();
	struct Reported {
		StoredEntry *stored;
		uint64_t hit, ns;
	};
	std::vector<Reported> reported;
	rte_rwlock_read_lock(&sw_->lock);
	for (auto &[key, stored] : entries) {
		int64_t timeout = stored.entry.idle_timeout_ns();
		uint8_t c_key[SW_KEY_MAX];
		if (timeout <= 0)
			continue;
		pack_key(*flows, stored, c_key);
		const sw_hash_slot *slot =
			sw_hash_find(&sw_->pipeline.tables.merge_flows, c_key);
		if (slot == nullptr)
			continue;
		uint64_t hit = sw_slot_last_hit(slot);
		if (sw_idle_ns(hit, now) < (uint64_t)timeout)
			continue;
		// While the entry stays idle the notification is sent
		// again every idle_timeout_ns (the specification's
		// "Idle-timeout"), so a controller that lost one
		// still learns of it.
		if (stored.reported_hit == hit &&
		    now - stored.reported_ns < (uint64_t)timeout)
			continue;
		reported.push_back(
			{&stored, stored.reported_hit, stored.reported_ns});
		stored.reported_hit = hit;
		stored.reported_ns = now;
		*notification->add_table_entry() = stored.entry;
	}
	rte_rwlock_read_unlock(&sw_->lock);
	if (notification->table_entry_size() == 0)
		return;
	notification->set_timestamp((int64_t)now);
	// A notification the primary's outbox had no room for (its bytes'
	// bound) reported nothing: the next scan tries again.
	if (primary != nullptr && !primary->send(message))
		for (const auto &r : reported) {
			r.stored->reported_hit = r.hit;
			r.stored->reported_ns = r.ns;
		}
}

} // namespace p4rt_server
