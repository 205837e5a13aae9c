// SPDX-License-Identifier: Apache-2.0
//
// The P4Runtime server's parts (see p4rt_server.cc): the entries it keeps,
// the streams of its clients, and the Server class, whose methods the
// p4rt_*.cc files define.
#pragma once

#include "p4rt_codec.h"
#include "p4rt_common.h"
#include "p4rt_roles.h"
#include "p4rt_schema.h"

namespace p4rt_server
{

// -- decoded entries --

struct DecodedField {
	bool present = false;
	Bits value, mask, low, high;
	int prefix_len = 0;
};

struct DecodedAction {
	uint32_t id = 0;
	std::string alias;
	std::vector<Bits> params; // in P4Info order
};

// One entry as the server keeps it.
struct StoredEntry {
	p4v1::TableEntry entry; // canonical
	std::vector<DecodedField> fields;
	DecodedAction action;
	// One-shot programming of the ECMP selector: the entry's next hops,
	// each with its weight, in the order given.
	std::vector<std::pair<sw_next_hop, int32_t>> one_shot;
	// Idle timeouts: the last-hit time already reported idle, and when.
	uint64_t reported_hit = UINT64_MAX;
	uint64_t reported_ns = 0;
};

struct Member {
	p4v1::ActionProfileMember member;
	sw_next_hop hop;
};

struct Group {
	p4v1::ActionProfileGroup group;
};

struct DigestConfig {
	p4v1::DigestEntry::Config config;
};

// What a Read has built, and how many entities it has looked at to build
// it: those it answers and those its filters passed over.
struct ReadOut {
	std::vector<p4v1::Entity> entities;
	size_t looked_at = 0;

	// false once the Read has looked at more than
	// p4rt_bounds::kMaxReadEntities: it stops there.
	bool look(size_t n = 1)
	{
		looked_at += n;
		return looked_at <= p4rt_bounds::kMaxReadEntities;
	}
	p4v1::Entity *add()
	{
		return &entities.emplace_back();
	}
};

struct Stream;

// What P4Runtime arbitration knows about one role.
struct RoleState {
	std::list<Stream *> streams;
	Stream *primary = nullptr;
	std::optional<RoleConfig> config; // none for the default role
};

using Uint128 = p4rt_writes::ElectionId;

inline Uint128 from_proto(const p4v1::Uint128 &id)
{
	return {id.high(), id.low()};
}

// Messages to one client wait here for its own writer thread. A sync
// gRPC Write blocks while the client does not read; written from the
// control loop or under the server's lock, one client that stopped
// reading (a hung controller) held up every other client's calls, even a
// new controller taking over. Past kStreamOutbox messages, or
// p4rt_bounds::kMaxStreamOutboxBytes bytes, the newest is dropped and
// counted (/jumbogate_switch/stats, stream_messages_dropped); the bytes all
// outboxes hold now are stream_outbox_bytes.
inline constexpr size_t kStreamOutbox = 1024;
extern std::atomic<uint64_t> g_stream_messages_dropped;
extern std::atomic<uint64_t> g_stream_outbox_bytes;
// Digests the server dropped: no digest config, or no primary to send to.
extern std::atomic<uint64_t> g_digests_dropped;
// Streams open now (StreamChannel calls that hold a slot), and those
// refused past kMaxStreams.
extern std::atomic<size_t> g_open_streams;
extern std::atomic<uint64_t> g_streams_refused;
// Streams open that have not arbitrated yet, and those closed for it: past
// kArbitrationDeadlineNs, or to make room past kMaxUnarbitratedStreams.
extern std::atomic<size_t> g_unarbitrated_streams;
extern std::atomic<uint64_t> g_unarbitrated_streams_closed;
// Reads refused past kMaxReadEntities.
extern std::atomic<uint64_t> g_reads_refused;
// Packet-outs refused with a stream error (the sender not primary, its
// role without packet I/O, metadata that is not the P4Info's, a payload
// that is not a frame) or with no room to send them.
extern std::atomic<uint64_t> g_packet_outs_refused;
// Accepted write updates by election id (/jumbogate_switch/writes).
extern p4rt_writes::WriteRecord g_writes;

struct Stream {
	grpc::ServerReaderWriter<p4v1::StreamMessageResponse,
				 p4v1::StreamMessageRequest> *rw;
	bool arbitrated = false;
	std::string role;
	bool has_election = false;
	Uint128 election;

	// Its slot among the open streams (Server::streams_mu_ guards them):
	// whether it holds one, and while it has not arbitrated, where it
	// waits among those that have not.
	grpc::ServerContext *context = nullptr;
	uint64_t opened_ns = 0;
	bool holds_slot = false;
	bool waits_arbitration = false;
	std::list<Stream *>::iterator waiting_at;

	std::mutex outbox_mu;
	std::condition_variable outbox_cv;
	std::deque<p4v1::StreamMessageResponse> outbox;
	// What the outbox holds (with the message the writer is writing): its
	// bytes, and its idle-timeout notifications.
	size_t outbox_bytes = 0;
	size_t idle_notifications = 0;
	bool closing = false;
	bool writing = false; /* the writer is inside Write */
	std::thread writer;

	void start()
	{
		writer = std::thread([this] { write_loop(); });
	}

	// Never blocks: queued for the writer thread. false when dropped (the
	// outbox full, or the stream closing).
	bool send(const p4v1::StreamMessageResponse &message)
	{
		size_t bytes = message.ByteSizeLong();
		{
			std::lock_guard<std::mutex> lock(outbox_mu);
			if (closing || outbox.size() >= kStreamOutbox ||
			    outbox_bytes + bytes >
				    p4rt_bounds::kMaxStreamOutboxBytes) {
				g_stream_messages_dropped++;
				return false;
			}
			outbox.push_back(message);
			add(outbox.back(), bytes);
		}
		outbox_cv.notify_all();
		return true;
	}

	// An idle-timeout notification is still waiting to be written: a
	// scan sends none more until it is (it would repeat the entries).
	bool idle_notification_waiting()
	{
		std::lock_guard<std::mutex> lock(outbox_mu);
		return idle_notifications > 0;
	}

	// The stream is over (the client closed it or the server stops):
	// what is still queued is dropped. A Write still blocked on a client
	// that does not read after a second is ended by cancelling the call
	// (only then: a cancelled call loses the status the stream returns,
	// e.g. an arbitration refusal).
	void stop(grpc::ServerContext *context)
	{
		std::unique_lock<std::mutex> lock(outbox_mu);
		closing = true;
		drop_all();
		outbox_cv.notify_all();
		if (!outbox_cv.wait_for(lock, std::chrono::seconds(1),
					[this] { return !writing; }))
			context->TryCancel();
		lock.unlock();
		if (writer.joinable())
			writer.join();
	}

      private:
	// Caller holds outbox_mu: a message enters the outbox, or leaves it
	// once written.
	void add(const p4v1::StreamMessageResponse &message, size_t bytes)
	{
		outbox_bytes += bytes;
		g_stream_outbox_bytes += bytes;
		if (message.has_idle_timeout_notification())
			idle_notifications++;
	}
	static void
	count_digests_dropped(const p4v1::StreamMessageResponse &message)
	{
		if (message.has_digest())
			g_digests_dropped += message.digest().data_size();
	}
	void remove(const p4v1::StreamMessageResponse &message, size_t bytes)
	{
		outbox_bytes -= bytes;
		g_stream_outbox_bytes -= bytes;
		if (message.has_idle_timeout_notification())
			idle_notifications--;
	}
	// Caller holds outbox_mu: what is queued is dropped and counted
	// (the digests of its digest lists in digests_dropped too).
	void drop_all()
	{
		for (const auto &message : outbox)
			count_digests_dropped(message);
		g_stream_messages_dropped += outbox.size();
		outbox.clear();
		g_stream_outbox_bytes -= outbox_bytes;
		outbox_bytes = 0;
		idle_notifications = 0;
	}

	void write_loop()
	{
		std::unique_lock<std::mutex> lock(outbox_mu);
		while (true) {
			outbox_cv.wait(lock, [this] {
				return closing || !outbox.empty();
			});
			if (closing)
				return;
			p4v1::StreamMessageResponse message =
				std::move(outbox.front());
			outbox.pop_front();
			writing = true;
			lock.unlock();
			bool written = rw->Write(message);
			lock.lock();
			writing = false;
			// Its bytes are held until it is written (had the
			// stream stopped meanwhile, drop_all let go of them).
			if (!closing)
				remove(message, message.ByteSizeLong());
			outbox_cv.notify_all();
			if (!written) {
				// The client is gone: nothing more can reach
				// it.
				count_digests_dropped(message);
				drop_all();
				closing = true;
				return;
			}
		}
	}
};

// The P4Runtime service. Its parts, by file: p4rt_server.cc (the RPCs,
// a new pipeline), p4rt_arbitration.cc (checks, arbitration and
// streams), p4rt_roles.cc (named roles' configs and what they allow),
// p4rt_digests.cc (packet I/O, digests, the control loop),
// p4rt_entries.cc (table entries: validation and writing),
// p4rt_appliers.cc (the adapter to the C tables: entries, defaults,
// action profiles, meters, counters, digests) and p4rt_read.cc (Read).
class Server final : public p4v1::P4Runtime::Service
{
      public:
	explicit Server(sw_switch *sw) : sw_(sw)
	{
	}
	bool init(std::string *why);
	void start_control_loop();
	void stop_control_loop();

	// -- Capabilities --
	// (p4rt_server.cc)
	Status Capabilities(grpc::ServerContext *,
			    const p4v1::CapabilitiesRequest *,
			    p4v1::CapabilitiesResponse *reply) override;

	// -- pipeline config --
	// (p4rt_server.cc)
	Status SetForwardingPipelineConfig(
		grpc::ServerContext *,
		const p4v1::SetForwardingPipelineConfigRequest *request,
		p4v1::SetForwardingPipelineConfigResponse *) override;
	Status GetForwardingPipelineConfig(
		grpc::ServerContext *,
		const p4v1::GetForwardingPipelineConfigRequest *request,
		p4v1::GetForwardingPipelineConfigResponse *reply) override;

	// -- Write --
	// (p4rt_entries.cc)
	Status Write(grpc::ServerContext *, const p4v1::WriteRequest *request,
		     p4v1::WriteResponse *) override;

	// -- Read --
	// (p4rt_read.cc)
	Status Read(grpc::ServerContext *, const p4v1::ReadRequest *request,
		    grpc::ServerWriter<p4v1::ReadResponse> *writer) override;

	// -- StreamChannel --
	// (p4rt_arbitration.cc)
	Status
	StreamChannel(grpc::ServerContext *context,
		      grpc::ServerReaderWriter<p4v1::StreamMessageResponse,
					       p4v1::StreamMessageRequest> *rw)
		override;

      private:
	// -- checks --
	// (p4rt_arbitration.cc)
	Status check_device(uint64_t device_id) const;
	static Status no_pipeline();
	Status check_primary(const std::string &role, bool has_election,
			     const Uint128 &election);
	template <typename Request> Status check_writer(const Request &request);
	Status check_readable(uint64_t device_id) const;

	// -- arbitration --
	// (p4rt_arbitration.cc)
	Status arbitrate(Stream *stream,
			 const p4v1::MasterArbitrationUpdate &update);
	bool below_fence(const std::string &role,
			 const Uint128 &election) const;
	void elect(const std::string &role, Stream *asking,
		   bool tell_all = false);
	void send_arbitration(Stream *stream, const RoleState &state);
	void leave(Stream *stream);
	Status take_slot(grpc::ServerContext *context, Stream *stream);
	void arbitrated(Stream *stream);
	void release_slot(Stream *stream);
	void close_unarbitrated(Stream *stream);
	void free_slot(Stream *stream);
	void close_late_streams();
	void stream_error(Stream *stream, StatusCode code,
			  const std::string &message,
			  const p4v1::PacketOut *packet = nullptr,
			  const p4v1::DigestListAck *ack = nullptr);
	Stream *primary_of(const std::string &role);

	// -- named roles: their configs, and what their primaries may do --
	// (p4rt_roles.cc)
	Status check_role(const std::string &role, StatusCode code);
	Status admit_config(const std::string &role,
			    const std::optional<RoleConfig> &config,
			    const Stream *stream, bool has_election,
			    const Uint128 &election, bool *changed);
	Status check_update_role(const std::string &role,
				 const p4v1::Entity &entity);
	Status check_pipeline_push(const std::string &role);
	bool may_packet_out(const Stream *stream);
	void send_packet_in(const p4v1::StreamMessageResponse &message);
	void count_roles();

	// -- packet I/O --
	// (p4rt_digests.cc)
	void packet_out(Stream *stream, const p4v1::PacketOut &packet);

	// -- digests --
	// (p4rt_digests.cc)
	void digest_ack(Stream *stream, const p4v1::DigestListAck &ack);

	struct Outstanding {
		std::vector<std::string> items;
		uint64_t sent_ns;
	};
	p4v1::P4Data encode_digest(const sw_elephant_digest &d) const;
	void flush_digests(uint64_t now, bool force);
	size_t digest_list_limit() const;
	bool recently_sent(const sw_elephant_digest &d) const;
	void expire_outstanding(uint64_t now);
	void forget_digests();

	// -- the control loop: digests, packet-in, idle timeouts --
	// (p4rt_digests.cc)
	void control_loop();
	void drain_packet_in();
	void scan_idle(uint64_t now);

	// -- table entries: validation --
	// (p4rt_entries.cc)
	Status decode_match(const TableInfo &table, const p4v1::TableEntry &in,
			    std::vector<DecodedField> *fields,
			    p4v1::TableEntry *canonical_entry);
	Status decode_field(const TableInfo &table, const FieldInfo &f,
			    const p4v1::FieldMatch &m, DecodedField *d);
	Status decode_action(const p4v1::Action &in, DecodedAction *out,
			     p4v1::Action *canonical_action);
	static std::string entry_key(const p4v1::TableEntry &canonical_entry);

	// -- table entries: writing --
	// (p4rt_entries.cc)
	Status write_one(const p4v1::Update &update);
	Status write_table_entry(p4v1::Update::Type type,
				 const p4v1::TableEntry &in);
	Status decode_table_action(const TableInfo &table,
				   const p4v1::TableEntry &in,
				   StoredEntry *stored);

	// One-shot action selector programming (P4Runtime "One Shot Action
	// Selector Programming"): the entry carries its actions and weights,
	// and the switch keeps them as its hop set; no member or group is made,
	// so none is read back. An action profile is programmed one way or the
	// other: mixing the two is INVALID_ARGUMENT.
	static constexpr const char *kMixedProfile =
		"ecmp_selector is programmed both one-shot and with members "
		"and groups: use one or the other";
	Status decode_one_shot(const TableInfo &table,
			       const p4v1::TableAction &action,
			       StoredEntry *stored);

	// -- the adapter to the C tables: entries and defaults --
	// (p4rt_appliers.cc)
	Bits arg(const DecodedAction &action, const char *name);
	sw_next_hop hop_of(const DecodedAction &action);
	Status apply_entry(const TableInfo &table, const StoredEntry &stored,
			   bool remove);
	void pack_key(const TableInfo &table, const StoredEntry &stored,
		      uint8_t key[SW_KEY_MAX]);
	int rebuild_services(const TableInfo &table);
	Status write_default(p4v1::Update::Type type, const TableInfo &table,
			     const p4v1::TableEntry &in);
	DecodedAction initial_default(const TableInfo &table);
	p4v1::TableEntry default_entry(const TableInfo &table);
	void apply_default(const TableInfo &table, const DecodedAction &action);

	// -- action profile members and groups (ecmp_selector) --
	// (p4rt_appliers.cc)
	Status check_profile_write(p4v1::Update::Type type, uint32_t profile_id,
				   bool exists, const std::string &what);
	Status write_member(p4v1::Update::Type type,
			    const p4v1::ActionProfileMember &in);
	bool member_in_use(uint32_t member_id);
	Status write_group(p4v1::Update::Type type,
			   const p4v1::ActionProfileGroup &in);
	int rebuild_next_hops();
	int
	build_hop_sets(std::vector<std::pair<uint32_t, sw_hop_set *>> *built);
	Status hop_sets_refused(const std::string &what);

	// -- meters, counters, digests --
	// (p4rt_appliers.cc)
	struct sw_meter *meter_cells(uint32_t meter_id);
	Status write_meter(p4v1::Update::Type type, const p4v1::MeterEntry &in);
	Status write_counter(p4v1::Update::Type type,
			     const p4v1::CounterEntry &in);
	Status write_digest(p4v1::Update::Type type,
			    const p4v1::DigestEntry &in);

	// -- Read --
	// (p4rt_read.cc)
	Status read_one(const p4v1::Entity &entity, ReadOut *out);
	Status read_table_entries(const p4v1::TableEntry &q, ReadOut *out);
	Status read_counters(const p4v1::CounterEntry &q, ReadOut *out);

	// -- a new pipeline: everything back to the program's defaults --
	// (p4rt_server.cc)
	void reset_state();

	sw_switch *sw_;
	Schema schema_;
	std::mutex mu_;
	std::optional<p4v1::ForwardingPipelineConfig> config_, saved_;
	std::map<std::string, RoleState> roles_;
	// Streams that have not arbitrated yet, oldest first, and the slots
	// of the open streams (g_open_streams). Taken alone: never with mu_.
	std::mutex streams_mu_;
	std::list<Stream *> unarbitrated_;
	// The highest election id this device made primary for the default
	// role: the fence of --fence-election-ids. Kept across streams and
	// pipelines. Named roles have election ids of their own, unfenced.
	std::optional<Uint128> fence_;
	std::map<uint32_t, std::map<std::string, StoredEntry>> entries_;
	std::map<uint32_t, StoredEntry> defaults_;
	std::map<uint32_t, Member> members_;
	std::map<uint32_t, Group> groups_;
	// Entries programmed one-shot, by their key: while any is held,
	// members and groups are refused, and the other way round.
	std::set<std::string> one_shot_entries_;
	// The data path's lock while a Write holds it (under mu_), so that
	// work on the server's state alone is done with it let go.
	p4rt_bounds::DataPlaneWriter *writer_ = nullptr;
	// Multicast groups and clone sessions (p4rt_pre.h).
	p4rt_pre::Engine pre_;
	// (meter id, index) -> its configuration, for reads.
	std::map<std::pair<uint32_t, int64_t>, p4v1::MeterConfig> meters_;
	std::optional<DigestConfig> digest_config_;
	std::deque<std::pair<sw_elephant_digest, uint64_t>> pending_;
	std::map<uint64_t, Outstanding> outstanding_;
	std::set<std::string> recent_;
	uint64_t next_list_id_ = 0;
	std::atomic<bool> stopping_{false};
	std::thread control_thread_;
};

} // namespace p4rt_server
