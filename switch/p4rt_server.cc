// SPDX-License-Identifier: Apache-2.0
//
// The P4Runtime server of jumbogate-switch (p4.v1.P4Runtime).
//
// The server keeps every entity as the canonical P4Runtime message it
// validated (match fields in field-id order, values at their bit width) and
// mirrors it into the C tables of pipeline.h under the pipeline's write lock,
// so Read answers exactly what was written and the data path never sees
// protobuf. Errors follow the P4Runtime specification: each update of a
// Write gets its own p4.v1.Error, and an update that fails changes nothing.
//
// The schema is the P4Info that p4c made from p4src/ (committed under
// p4src/compiled/ and compiled into this program); a client's P4Info must
// equal it, since the pipeline behind this server is fixed.
#include "grpc_listen.h"
#include "p4rt_bounds.h"
#include "p4rt_pre.h"
#include "p4rt_writes.h"
#include "switch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/config/v1/p4info.pb.h"
#include "p4/v1/p4runtime.grpc.pb.h"

namespace
{

namespace p4v1 = ::p4::v1;
namespace p4cfg = ::p4::config::v1;
using grpc::Status;
using grpc::StatusCode;

constexpr const char *kApiVersion = "1.4.0";
// Read answers are streamed in messages of at most this many entities.
constexpr int kReadBatch = 1000;
// The longest message of one update's p4.v1.Error in a failed Write.
constexpr size_t kMaxErrorMessage = 200;
// Digests the server remembers for de-duplication (ack_timeout_ns): past
// this many, the oldest unacknowledged lists are forgotten.
constexpr size_t kDigestMemory = 4096;

Status error(StatusCode code, const std::string &message)
{
	return Status(code, message);
}

// INSERT needs a new key, MODIFY and DELETE an existing one (P4Runtime
// 9.1): the one place that says so for every kind of entity.
Status check_presence(p4v1::Update::Type type, bool exists,
		      const std::string &what)
{
	if (type == p4v1::Update::UNSPECIFIED)
		return error(StatusCode::INVALID_ARGUMENT,
			     "update type is unspecified");
	if (type == p4v1::Update::INSERT && exists)
		return error(StatusCode::ALREADY_EXISTS,
			     what + " exists already");
	if (type != p4v1::Update::INSERT && !exists)
		return error(StatusCode::NOT_FOUND, "no " + what);
	return Status::OK;
}

// -- bit strings --

// A P4Runtime value decoded to a right-aligned 16-byte big-endian number.
struct Bits {
	uint8_t b[16] = {};

	uint64_t u64() const
	{
		uint64_t v = 0;
		for (int i = 8; i < 16; i++)
			v = v << 8 | b[i];
		return v;
	}
	// The last n bytes (an address of n bytes).
	const uint8_t *tail(int n) const
	{
		return b + 16 - n;
	}
	bool zero() const
	{
		for (uint8_t x : b)
			if (x)
				return false;
		return true;
	}
};

// Decodes a bytestring of at most `bitwidth` significant bits. The
// specification allows leading zeros; a value wider than the field is an
// error, as is an empty string.
bool decode_bits(const std::string &bytes, int bitwidth, Bits *out,
		 std::string *why)
{
	size_t first = 0;
	while (first < bytes.size() && bytes[first] == 0)
		first++;
	size_t significant = bytes.size() - first;
	if (bytes.empty()) {
		*why = "empty bytestring";
		return false;
	}
	if (significant > 16 ||
	    (significant > 0 &&
	     (int)(8 * (significant - 1) +
		   (32 - __builtin_clz((unsigned char)bytes[first]))) >
		     bitwidth)) {
		*why = "value does not fit in " + std::to_string(bitwidth) +
		       " bits";
		return false;
	}
	*out = Bits();
	std::memcpy(out->b + 16 - significant, bytes.data() + first,
		    significant);
	return true;
}

// The shortest representation (P4Runtime 1.3's canonical form).
std::string canonical(const Bits &bits)
{
	int first = 0;
	while (first < 15 && bits.b[first] == 0)
		first++;
	return std::string(reinterpret_cast<const char *>(bits.b + first),
			   16 - first);
}

std::string canonical_u64(uint64_t v)
{
	Bits bits;
	for (int i = 15; i >= 8; i--, v >>= 8)
		bits.b[i] = (uint8_t)v;
	return canonical(bits);
}

Bits prefix_mask(int bitwidth, int prefix_len)
{
	Bits mask;
	for (int bit = 0; bit < prefix_len; bit++) {
		int position = bitwidth - 1 - bit; // from the least significant
		mask.b[15 - position / 8] |= (uint8_t)(1u << (position % 8));
	}
	return mask;
}

Bits width_mask(int bitwidth)
{
	return prefix_mask(bitwidth, bitwidth);
}

// -- the schema --

// The tables the C pipeline implements, by P4Info alias.
enum class Table {
	PortRoles,
	DepthPolicy,
	NicPort,
	FleetPolicy,
	InstancesV4,
	InstancesV6,
	PathMtuV4,
	PathMtuV6,
	MergeFlows,
	MergeServices,
	ElephantConfig,
	RoutesV4,
	RoutesV6,
	NextHops,
	SignalSource,
};

const std::map<std::string, Table> kTables = {
	{"port_roles", Table::PortRoles},
	{"depth_policy", Table::DepthPolicy},
	{"nic_port", Table::NicPort},
	{"fleet_policy", Table::FleetPolicy},
	{"instances_v4", Table::InstancesV4},
	{"instances_v6", Table::InstancesV6},
	{"path_mtu_v4", Table::PathMtuV4},
	{"path_mtu_v6", Table::PathMtuV6},
	{"merge_flows", Table::MergeFlows},
	{"merge_services", Table::MergeServices},
	{"elephant_config", Table::ElephantConfig},
	{"routes_v4", Table::RoutesV4},
	{"routes_v6", Table::RoutesV6},
	{"next_hops", Table::NextHops},
	{"signal_source", Table::SignalSource},
};

// The P4 program's default actions of tables whose default a controller
// may change (default_action without const), as (action alias, params).
// A MODIFY of the default entry without an action restores these.
const std::map<
	std::string,
	std::pair<std::string, std::vector<std::pair<std::string, uint64_t>>>>
	kInitialDefaults = {
		{"depth_policy", {"drop_too_deep", {}}},
		{"nic_port", {"no_nic_port", {}}},
		{"fleet_policy",
		 {"set_fleet_jumbo",
		  {{"enabled", 0},
		   {"guest_jumbo_mtu", P4_MTU_JUMBO},
		   {"default_mtu", P4_MTU_STANDARD}}}},
		{"path_mtu_v4", {"set_path_mtu", {{"mtu", P4_MTU_STANDARD}}}},
		{"path_mtu_v6",
		 {"set_path_mtu", {{"mtu", P4_MTU_IPV6_MINIMUM}}}},
		{"elephant_config", {"set_elephant_threshold", {{"bytes", 0}}}},
		{"signal_source", {"signal_from_original_destination", {}}},
};

const std::map<std::string, sw_counter_id> kCounters = {
	{"port_rx", SW_COUNTER_PORT_RX},
	{"port_tx", SW_COUNTER_PORT_TX},
	{"drop_reasons", SW_COUNTER_DROP_REASONS},
	{"paths", SW_COUNTER_PATHS},
	{"icmp_signals", SW_COUNTER_ICMP_SIGNALS},
};

struct FieldInfo {
	uint32_t id;
	std::string name;
	int bitwidth;
	p4cfg::MatchField::MatchType type;
};

struct ParamInfo {
	uint32_t id;
	std::string name;
	int bitwidth;
};

struct ActionInfo {
	uint32_t id;
	std::string alias;
	std::vector<ParamInfo> params;
};

struct TableInfo {
	uint32_t id;
	std::string alias;
	Table kind;
	std::vector<FieldInfo> fields;
	std::set<uint32_t> actions;
	std::set<uint32_t> default_only; // @defaultonly
	std::set<uint32_t> table_only;	 // @tableonly
	uint32_t const_default_action = 0;
	uint32_t action_profile = 0;
	int64_t size = 0;
	bool idle_timeout = false;
	bool needs_priority = false;
};

struct Schema {
	p4cfg::P4Info p4info;
	std::map<uint32_t, TableInfo> tables;
	std::map<uint32_t, ActionInfo> actions;
	std::map<std::string, uint32_t> action_ids; // by alias
	uint32_t ecmp_selector = 0;
	int64_t ecmp_max_group_size = 0;
	int64_t ecmp_size = 0;
	std::map<uint32_t, std::pair<sw_counter_id, int64_t>> counters;
	// Meter id -> (alias, size): icmp_signal_meter and icmp_source_meter.
	std::map<uint32_t, std::pair<std::string, int64_t>> meters;
	uint32_t elephant_digest = 0;
	std::vector<int> digest_widths; // the digest struct's members

	const TableInfo *table(const std::string &alias) const
	{
		for (const auto &[id, t] : tables)
			if (t.alias == alias)
				return &t;
		return nullptr;
	}
};

std::string alias_of(const p4cfg::Preamble &preamble)
{
	return preamble.alias().empty() ? preamble.name() : preamble.alias();
}

// Builds the schema from the program's P4Info; false (with why) when the
// P4Info lacks something the C pipeline implements.
bool build_schema(const std::string &text, Schema *schema, std::string *why)
{
	if (!google::protobuf::TextFormat::ParseFromString(text,
							   &schema->p4info)) {
		*why = "the built-in P4Info does not parse";
		return false;
	}
	const auto &info = schema->p4info;
	for (const auto &action : info.actions()) {
		ActionInfo a{action.preamble().id(),
			     alias_of(action.preamble()),
			     {}};
		for (const auto &p : action.params())
			a.params.push_back({p.id(), p.name(), p.bitwidth()});
		schema->action_ids[a.alias] = a.id;
		schema->actions[a.id] = a;
	}
	for (const auto &table : info.tables()) {
		TableInfo t;
		t.id = table.preamble().id();
		t.alias = alias_of(table.preamble());
		auto kind = kTables.find(t.alias);
		if (kind == kTables.end()) {
			*why = "table " + t.alias +
			       " of the P4Info has no implementation here";
			return false;
		}
		t.kind = kind->second;
		for (const auto &f : table.match_fields()) {
			t.fields.push_back({f.id(), f.name(), f.bitwidth(),
					    f.match_type()});
			if (f.match_type() == p4cfg::MatchField::TERNARY ||
			    f.match_type() == p4cfg::MatchField::RANGE ||
			    f.match_type() == p4cfg::MatchField::OPTIONAL)
				t.needs_priority = true;
		}
		std::sort(t.fields.begin(), t.fields.end(),
			  [](const FieldInfo &a, const FieldInfo &b) {
				  return a.id < b.id;
			  });
		for (const auto &ref : table.action_refs()) {
			t.actions.insert(ref.id());
			if (ref.scope() == p4cfg::ActionRef::DEFAULT_ONLY)
				t.default_only.insert(ref.id());
			if (ref.scope() == p4cfg::ActionRef::TABLE_ONLY)
				t.table_only.insert(ref.id());
		}
		t.const_default_action = table.const_default_action_id();
		t.action_profile = table.implementation_id();
		t.size = table.size();
		t.idle_timeout = table.idle_timeout_behavior() ==
				 p4cfg::Table::NOTIFY_CONTROL;
		schema->tables[t.id] = t;
	}
	for (const auto &[alias, kind] : kTables)
		if (schema->table(alias) == nullptr) {
			*why = "the P4Info has no table " + alias;
			return false;
		}
	for (const auto &profile : info.action_profiles())
		if (alias_of(profile.preamble()) == "ecmp_selector") {
			schema->ecmp_selector = profile.preamble().id();
			schema->ecmp_max_group_size = profile.max_group_size();
			schema->ecmp_size = profile.size();
		}
	for (const auto &counter : info.counters()) {
		auto kind = kCounters.find(alias_of(counter.preamble()));
		if (kind != kCounters.end())
			schema->counters[counter.preamble().id()] = {
				kind->second, counter.size()};
	}
	for (const auto &meter : info.meters()) {
		const std::string alias = alias_of(meter.preamble());
		if (alias == "icmp_signal_meter" ||
		    alias == "icmp_source_meter")
			schema->meters[meter.preamble().id()] = {alias,
								 meter.size()};
	}
	for (const auto &digest : info.digests())
		if (alias_of(digest.preamble()) == "elephant_digest_t") {
			schema->elephant_digest = digest.preamble().id();
			const auto &name = digest.type_spec().struct_().name();
			const auto &structs = info.type_info().structs();
			auto found = structs.find(name);
			if (found != structs.end())
				for (const auto &m : found->second.members())
					schema->digest_widths.push_back(
						m.type_spec()
							.bitstring()
							.bit()
							.bitwidth());
		}
	if (schema->ecmp_selector == 0 || schema->meters.size() != 2 ||
	    schema->elephant_digest == 0 || schema->digest_widths.size() != 7 ||
	    schema->counters.size() != kCounters.size()) {
		*why = "the P4Info lacks the selector, meter, digest or a "
		       "counter of the pipeline";
		return false;
	}
	return true;
}

// The first difference between a client's P4Info and this switch's, in
// words; empty when they describe the same pipeline.
template <typename T>
std::string compare_objects(const char *what,
			    const google::protobuf::RepeatedPtrField<T> &mine,
			    const google::protobuf::RepeatedPtrField<T> &theirs)
{
	std::map<std::string, const T *> by_name;
	for (const auto &o : theirs)
		by_name[o.preamble().name()] = &o;
	for (const auto &o : mine) {
		auto found = by_name.find(o.preamble().name());
		if (found == by_name.end())
			return std::string(what) + " " + o.preamble().name() +
			       " is missing";
		if (found->second->preamble().id() != o.preamble().id())
			return std::string(what) + " " + o.preamble().name() +
			       " has id " +
			       std::to_string(found->second->preamble().id()) +
			       ", this switch's is " +
			       std::to_string(o.preamble().id());
		google::protobuf::util::MessageDifferencer differ;
		std::string report;
		differ.ReportDifferencesToString(&report);
		differ.IgnoreField(
			p4cfg::Preamble::descriptor()->FindFieldByName("doc"));
		if (!differ.Compare(*found->second, o)) {
			auto newline = report.find('\n');
			return std::string(what) + " " + o.preamble().name() +
			       " differs: " + report.substr(0, newline);
		}
	}
	if (theirs.size() != mine.size())
		return std::string("the P4Info has ") +
		       std::to_string(theirs.size()) + " " + what +
		       " objects, this switch " + std::to_string(mine.size());
	return "";
}

std::string compare_p4info(const p4cfg::P4Info &mine,
			   const p4cfg::P4Info &theirs)
{
	std::string diff;
	if (!(diff = compare_objects("table", mine.tables(), theirs.tables()))
		     .empty() ||
	    !(diff = compare_objects("action", mine.actions(),
				     theirs.actions()))
		     .empty() ||
	    !(diff = compare_objects("action profile", mine.action_profiles(),
				     theirs.action_profiles()))
		     .empty() ||
	    !(diff = compare_objects("counter", mine.counters(),
				     theirs.counters()))
		     .empty() ||
	    !(diff = compare_objects("direct counter", mine.direct_counters(),
				     theirs.direct_counters()))
		     .empty() ||
	    !(diff = compare_objects("meter", mine.meters(), theirs.meters()))
		     .empty() ||
	    !(diff = compare_objects("direct meter", mine.direct_meters(),
				     theirs.direct_meters()))
		     .empty() ||
	    !(diff = compare_objects("register", mine.registers(),
				     theirs.registers()))
		     .empty() ||
	    !(diff = compare_objects("digest", mine.digests(),
				     theirs.digests()))
		     .empty() ||
	    !(diff = compare_objects("controller packet metadata",
				     mine.controller_packet_metadata(),
				     theirs.controller_packet_metadata()))
		     .empty() ||
	    !(diff = compare_objects("value set", mine.value_sets(),
				     theirs.value_sets()))
		     .empty())
		return diff;
	google::protobuf::util::MessageDifferencer differ;
	std::string report;
	differ.ReportDifferencesToString(&report);
	if (!differ.Compare(theirs.type_info(), mine.type_info()))
		return "type_info differs: " +
		       report.substr(0, report.find('\n'));
	return "";
}

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

struct Stream;

// What P4Runtime arbitration knows about one role.
struct RoleState {
	std::list<Stream *> streams;
	Stream *primary = nullptr;
};

using Uint128 = p4rt_writes::ElectionId;

Uint128 from_proto(const p4v1::Uint128 &id)
{
	return {id.high(), id.low()};
}

// Messages to one client wait here for its own writer thread. A sync
// gRPC Write blocks while the client does not read; written from the
// control loop or under the server's lock, one client that stopped
// reading (a hung controller) held up every other client's calls, even a
// new controller taking over. Past kStreamOutbox messages the newest is
// dropped and counted (/jumbogate_switch/stats, stream_messages_dropped).
constexpr size_t kStreamOutbox = 1024;
std::atomic<uint64_t> g_stream_messages_dropped{0};
// Digests the server dropped: no digest config, or no primary to send to.
std::atomic<uint64_t> g_digests_dropped{0};
// StreamChannel calls open now, and those refused past kMaxStreams.
std::atomic<size_t> g_open_streams{0};
std::atomic<uint64_t> g_streams_refused{0};
// Accepted write updates by election id (/jumbogate_switch/writes).
p4rt_writes::WriteRecord g_writes;

struct Stream {
	grpc::ServerReaderWriter<p4v1::StreamMessageResponse,
				 p4v1::StreamMessageRequest> *rw;
	bool arbitrated = false;
	std::string role;
	bool has_election = false;
	Uint128 election;

	std::mutex outbox_mu;
	std::condition_variable outbox_cv;
	std::deque<p4v1::StreamMessageResponse> outbox;
	bool closing = false;
	bool writing = false; /* the writer is inside Write */
	std::thread writer;

	void start()
	{
		writer = std::thread([this] { write_loop(); });
	}

	// Never blocks: queued for the writer thread.
	void send(const p4v1::StreamMessageResponse &message)
	{
		{
			std::lock_guard<std::mutex> lock(outbox_mu);
			if (closing || outbox.size() >= kStreamOutbox) {
				g_stream_messages_dropped++;
				return;
			}
			outbox.push_back(message);
		}
		outbox_cv.notify_all();
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
		g_stream_messages_dropped += outbox.size();
		outbox.clear();
		outbox_cv.notify_all();
		if (!outbox_cv.wait_for(lock, std::chrono::seconds(1),
					[this] { return !writing; }))
			context->TryCancel();
		lock.unlock();
		if (writer.joinable())
			writer.join();
	}

      private:
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
			outbox_cv.notify_all();
			if (!written) {
				// The client is gone: nothing more can reach
				// it.
				g_stream_messages_dropped += outbox.size();
				outbox.clear();
				closing = true;
				return;
			}
		}
	}
};

class Server;
Server *g_server = nullptr;

class Server final : public p4v1::P4Runtime::Service
{
      public:
	explicit Server(sw_switch *sw) : sw_(sw)
	{
	}

	bool init(std::string *why)
	{
		const char *text = sw_builtin_p4info(sw_->parse_depth);
		if (text == nullptr) {
			*why = "no built-in P4Info for a parse depth of " +
			       std::to_string(sw_->parse_depth);
			return false;
		}
		return build_schema(text, &schema_, why);
	}

	void start_control_loop()
	{
		control_thread_ = std::thread([this] { control_loop(); });
	}

	void stop_control_loop()
	{
		stopping_ = true;
		if (control_thread_.joinable())
			control_thread_.join();
	}

	// -- Capabilities --

	Status Capabilities(grpc::ServerContext *,
			    const p4v1::CapabilitiesRequest *,
			    p4v1::CapabilitiesResponse *reply) override
	{
		reply->set_p4runtime_api_version(kApiVersion);
		return Status::OK;
	}

	// -- pipeline config --

	Status SetForwardingPipelineConfig(
		grpc::ServerContext *,
		const p4v1::SetForwardingPipelineConfigRequest *request,
		p4v1::SetForwardingPipelineConfigResponse *) override
	{
		std::lock_guard<std::mutex> lock(mu_);
		Status status = check_device(request->device_id());
		if (status.ok())
			status = check_role(request->role(),
					    StatusCode::NOT_FOUND);
		if (!status.ok())
			return status;
		status = check_primary(request->role(),
				       request->has_election_id(),
				       from_proto(request->election_id()));
		if (!status.ok())
			return status;
		using Req = p4v1::SetForwardingPipelineConfigRequest;
		auto action = request->action();
		if (action == Req::COMMIT) {
			if (!saved_)
				return error(StatusCode::FAILED_PRECONDITION,
					     "COMMIT without a saved config "
					     "(use VERIFY_AND_SAVE first)");
			config_ = *saved_;
			saved_.reset();
			reset_state();
			return Status::OK;
		}
		if (action == Req::UNSPECIFIED)
			return error(StatusCode::INVALID_ARGUMENT,
				     "action is unspecified");
		if (!request->has_config() || !request->config().has_p4info())
			return error(StatusCode::INVALID_ARGUMENT,
				     "the config has no P4Info");
		std::string diff = compare_p4info(schema_.p4info,
						  request->config().p4info());
		if (!diff.empty())
			return error(StatusCode::INVALID_ARGUMENT,
				     "this P4Info is not the jumbogate "
				     "pipeline this switch runs: " +
					     diff);
		switch (action) {
		case Req::VERIFY:
			return Status::OK;
		case Req::VERIFY_AND_SAVE:
			saved_ = request->config();
			return Status::OK;
		case Req::VERIFY_AND_COMMIT:
			config_ = request->config();
			reset_state();
			return Status::OK;
		case Req::RECONCILE_AND_COMMIT:
			// Same pipeline: the forwarding state stays.
			if (!config_)
				reset_state();
			config_ = request->config();
			return Status::OK;
		default:
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown action");
		}
	}

	Status GetForwardingPipelineConfig(
		grpc::ServerContext *,
		const p4v1::GetForwardingPipelineConfigRequest *request,
		p4v1::GetForwardingPipelineConfigResponse *reply) override
	{
		std::lock_guard<std::mutex> lock(mu_);
		Status status = check_device(request->device_id());
		if (!status.ok())
			return status;
		if (!config_)
			return no_pipeline();
		using Req = p4v1::GetForwardingPipelineConfigRequest;
		auto *out = reply->mutable_config();
		switch (request->response_type()) {
		case Req::ALL:
			*out = *config_;
			break;
		case Req::COOKIE_ONLY:
			*out->mutable_cookie() = config_->cookie();
			break;
		case Req::P4INFO_AND_COOKIE:
			*out->mutable_p4info() = config_->p4info();
			*out->mutable_cookie() = config_->cookie();
			break;
		case Req::DEVICE_CONFIG_AND_COOKIE:
			out->set_p4_device_config(config_->p4_device_config());
			*out->mutable_cookie() = config_->cookie();
			break;
		default:
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown response_type");
		}
		return Status::OK;
	}

	// -- Write --

	Status Write(grpc::ServerContext *, const p4v1::WriteRequest *request,
		     p4v1::WriteResponse *) override
	{
		std::lock_guard<std::mutex> lock(mu_);
		Status status = check_device(request->device_id());
		if (status.ok())
			status = check_role(request->role(),
					    StatusCode::NOT_FOUND);
		if (!status.ok())
			return status;
		// Who may write comes before what there is to write to
		// (P4Runtime 12.2): a backup is PERMISSION_DENIED even before
		// any pipeline config.
		status = check_primary(request->role(),
				       request->has_election_id(),
				       from_proto(request->election_id()));
		if (!status.ok())
			return status;
		if (!config_)
			return no_pipeline();
		if (request->atomicity() !=
		    p4v1::WriteRequest::CONTINUE_ON_ERROR)
			return error(StatusCode::UNIMPLEMENTED,
				     "only CONTINUE_ON_ERROR atomicity is "
				     "supported");
		if (request->updates_size() > p4rt_bounds::kMaxUpdatesPerBatch)
			return error(
				StatusCode::RESOURCE_EXHAUSTED,
				"a batch of " +
					std::to_string(
						request->updates_size()) +
					" updates: this switch takes at most " +
					std::to_string(
						p4rt_bounds::
							kMaxUpdatesPerBatch) +
					" in one WriteRequest");
		std::vector<Status> results;
		bool failed = false;
		{
			// Each update is applied whole under the data path's
			// lock; packets may pass between two of them.
			p4rt_bounds::DataPlaneWriter writer(&sw_->lock);
			for (const auto &update : request->updates()) {
				if (!results.empty())
					writer.pause_if_due();
				results.push_back(write_one(update));
				failed |= !results.back().ok();
			}
		}
		uint64_t accepted = 0;
		for (const auto &result : results)
			accepted += result.ok();
		g_writes.add(from_proto(request->election_id()), accepted);
		if (!failed)
			return Status::OK;
		// One p4.v1.Error per update, in order (P4Runtime 12.3).
		google::rpc::Status details;
		details.set_code(google::rpc::UNKNOWN);
		details.set_message("write failure");
		// The details travel in the trailers, which a gRPC client caps
		// at 16 KiB by default ("metadata size exceeds hard limit",
		// RESOURCE_EXHAUSTED, though the batch was applied). So each
		// detail is as small as the specification lets it be: an OK
		// update carries only its code (an empty p4.v1.Error), a
		// message is cut at kMaxErrorMessage bytes, and the Any's type
		// URL is "/p4.v1.Error" (its last segment names the type, all
		// an Any needs; the default "type.googleapis.com/" prefix
		// doubled the size of an OK detail). docs/switch.md gives the
		// batch sizes a default client reads.
		for (const auto &result : results) {
			p4v1::Error e;
			e.set_canonical_code(result.error_code());
			if (!result.ok()) {
				std::string message = result.error_message();
				if (message.size() > kMaxErrorMessage)
					message = message.substr(
							  0, kMaxErrorMessage -
								     3) +
						  "...";
				e.set_message(message);
				e.set_space("p4.v1");
			}
			details.add_details()->PackFrom(e, "");
		}
		return Status(StatusCode::UNKNOWN, "write failure",
			      details.SerializeAsString());
	}

	// -- Read --

	Status Read(grpc::ServerContext *, const p4v1::ReadRequest *request,
		    grpc::ServerWriter<p4v1::ReadResponse> *writer) override
	{
		std::vector<p4v1::Entity> out;
		{
			std::lock_guard<std::mutex> lock(mu_);
			Status status = check_device(request->device_id());
			if (!status.ok())
				return status;
			if (!config_)
				return no_pipeline();
			for (const auto &entity : request->entities()) {
				status = read_one(entity, &out);
				if (!status.ok())
					return status;
			}
		}
		for (size_t i = 0; i < out.size() || i == 0; i += kReadBatch) {
			p4v1::ReadResponse reply;
			for (size_t j = i; j < out.size() && j < i + kReadBatch;
			     j++)
				*reply.add_entities() = std::move(out[j]);
			if (!writer->Write(reply))
				break;
			if (out.empty())
				break;
		}
		return Status::OK;
	}

	// -- StreamChannel --

	Status
	StreamChannel(grpc::ServerContext *context,
		      grpc::ServerReaderWriter<p4v1::StreamMessageResponse,
					       p4v1::StreamMessageRequest> *rw)
		override
	{
		// Each stream holds a thread of the server from its first
		// message, arbitrated or not: past the bound the newest is
		// closed at once.
		struct Open {
			~Open()
			{
				g_open_streams--;
			}
		} open;
		if (++g_open_streams > p4rt_bounds::kMaxStreams) {
			g_streams_refused++;
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     std::to_string(p4rt_bounds::kMaxStreams) +
					     " streams are open, the most "
					     "this switch takes");
		}
		Stream stream;
		stream.rw = rw;
		stream.start();
		p4v1::StreamMessageRequest request;
		Status result = Status::OK;
		while (!context->IsCancelled() && rw->Read(&request)) {
			switch (request.update_case()) {
			case p4v1::StreamMessageRequest::kArbitration:
				result = arbitrate(&stream,
						   request.arbitration());
				break;
			case p4v1::StreamMessageRequest::kPacket:
				packet_out(&stream, request.packet());
				break;
			case p4v1::StreamMessageRequest::kDigestAck:
				digest_ack(&stream, request.digest_ack());
				break;
			default:
				stream_error(&stream, StatusCode::UNIMPLEMENTED,
					     "unsupported stream message");
				break;
			}
			if (!result.ok())
				break;
		}
		leave(&stream);
		stream.stop(context);
		return result;
	}

      private:
	// -- checks --

	Status check_device(uint64_t device_id) const
	{
		if (device_id != sw_->device_id)
			return error(StatusCode::NOT_FOUND,
				     "no device " + std::to_string(device_id) +
					     " (this switch is device " +
					     std::to_string(sw_->device_id) +
					     ")");
		return Status::OK;
	}

	static Status no_pipeline()
	{
		return error(StatusCode::FAILED_PRECONDITION,
			     "No forwarding pipeline config set for this "
			     "device");
	}

	// Role configurations are not implemented, so the device has one role,
	// the default (unnamed) one, whose primary may write everything. Any
	// other name is refused: a client naming a role of its own would
	// otherwise be the primary of it, and write beside the controller.
	static Status check_role(const std::string &role, StatusCode code)
	{
		if (role.empty())
			return Status::OK;
		return error(code, "no role '" + role +
					   "' on this device: it has only the "
					   "default role (an empty name)");
	}

	// Caller holds mu_.
	Status check_primary(const std::string &role, bool has_election,
			     const Uint128 &election)
	{
		if (has_election && below_fence(election))
			return error(StatusCode::PERMISSION_DENIED,
				     "election id " + election.text() +
					     " is below " + fence_->text() +
					     ", the highest this device made "
					     "primary (--fence-election-ids)");
		auto found = roles_.find(role);
		Stream *primary =
			found == roles_.end() ? nullptr : found->second.primary;
		if (primary == nullptr)
			return error(StatusCode::PERMISSION_DENIED,
				     "no primary client for role '" + role +
					     "': open a stream and send an "
					     "arbitration update first");
		if (!has_election || !(primary->election == election))
			return error(StatusCode::PERMISSION_DENIED,
				     "not the primary client (its election id "
				     "is not the highest of role '" +
					     role + "')");
		return Status::OK;
	}

	// -- arbitration --

	Status arbitrate(Stream *stream,
			 const p4v1::MasterArbitrationUpdate &update)
	{
		std::lock_guard<std::mutex> lock(mu_);
		// A stream arbitrated for this device that names another is
		// FAILED_PRECONDITION (a stream's device cannot change); a new
		// stream naming an unknown device is NOT_FOUND.
		if (update.device_id() != sw_->device_id)
			return error(
				stream->arbitrated
					? StatusCode::FAILED_PRECONDITION
					: StatusCode::NOT_FOUND,
				"arbitration for device " +
					std::to_string(update.device_id()) +
					", this switch is device " +
					std::to_string(sw_->device_id));
		if (update.role().has_config())
			return error(StatusCode::UNIMPLEMENTED,
				     "role configurations are not supported");
		std::string role = update.role().name();
		if (stream->arbitrated && role != stream->role)
			return error(StatusCode::FAILED_PRECONDITION,
				     "a stream cannot change its role");
		// A role the device does not have does not match the role
		// scheme agreed out of band: INVALID_ARGUMENT, as the
		// specification's arbitration rules say for a role config
		// that does not match it. (PERMISSION_DENIED is for a known
		// client that may not do something, e.g. a backup's write.)
		Status status = check_role(role, StatusCode::INVALID_ARGUMENT);
		if (!status.ok())
			return status;
		auto &state = roles_[role];
		if (!stream->arbitrated &&
		    state.streams.size() >= p4rt_bounds::kMaxStreamsPerRole)
			return error(
				StatusCode::RESOURCE_EXHAUSTED,
				"this role has " +
					std::to_string(state.streams.size()) +
					" streams already, the most this "
					"switch takes");
		bool has_election = update.has_election_id();
		Uint128 election = from_proto(update.election_id());
		if (has_election)
			for (Stream *other : state.streams)
				if (other != stream && other->has_election &&
				    other->election == election)
					return error(
						StatusCode::INVALID_ARGUMENT,
						"election id already used by "
						"another client of this role");
		if (!stream->arbitrated) {
			state.streams.push_back(stream);
			stream->arbitrated = true;
			stream->role = role;
		}
		stream->has_election = has_election;
		stream->election = election;
		elect(role, stream);
		return Status::OK;
	}

	// With --fence-election-ids, an id below the highest this device ever
	// made primary: a deposed leader, which may read and be a backup but
	// never be primary or write again, even once the stream of the id
	// that deposed it has gone.
	bool below_fence(const Uint128 &election) const
	{
		return sw_->fence_election_ids && fence_ && election < *fence_;
	}

	// Recomputes the primary of a role and tells who needs to know: every
	// stream when the primary changed, else only `asking`.
	void elect(const std::string &role, Stream *asking)
	{
		auto &state = roles_[role];
		Stream *best = nullptr;
		for (Stream *s : state.streams)
			if (s->has_election && !below_fence(s->election) &&
			    (best == nullptr || best->election < s->election))
				best = s;
		bool changed = best != state.primary;
		state.primary = best;
		if (best != nullptr && (!fence_ || *fence_ < best->election))
			fence_ = best->election;
		for (Stream *s : state.streams)
			if (changed || s == asking)
				send_arbitration(s, state);
	}

	void send_arbitration(Stream *stream, const RoleState &state)
	{
		p4v1::StreamMessageResponse message;
		auto *update = message.mutable_arbitration();
		update->set_device_id(sw_->device_id);
		update->mutable_role()->set_name(stream->role);
		if (state.primary != nullptr) {
			update->mutable_election_id()->set_high(
				state.primary->election.high);
			update->mutable_election_id()->set_low(
				state.primary->election.low);
		}
		if (state.primary == stream) {
			update->mutable_status()->set_code(google::rpc::OK);
			update->mutable_status()->set_message("is primary");
		} else if (state.primary != nullptr) {
			update->mutable_status()->set_code(
				google::rpc::ALREADY_EXISTS);
			update->mutable_status()->set_message(
				"is backup: another client is primary");
		} else if (stream->has_election &&
			   below_fence(stream->election)) {
			update->mutable_status()->set_code(
				google::rpc::PERMISSION_DENIED);
			update->mutable_status()->set_message(
				"no primary client, and election id " +
				stream->election.text() + " is below " +
				fence_->text() +
				", the highest this device made primary "
				"(--fence-election-ids): never primary "
				"again");
		} else {
			update->mutable_status()->set_code(
				google::rpc::NOT_FOUND);
			update->mutable_status()->set_message(
				"no primary client");
		}
		stream->send(message);
	}

	void leave(Stream *stream)
	{
		std::lock_guard<std::mutex> lock(mu_);
		if (!stream->arbitrated)
			return;
		auto &state = roles_[stream->role];
		state.streams.remove(stream);
		if (state.streams.empty()) {
			roles_.erase(stream->role);
		} else if (state.primary == stream) {
			if (!sw_->primary_on_leave_wait) {
				// A deviation by design (docs/switch.md): the
				// highest backup takes over at once, so the
				// device is never left without a primary
				// while a backup is connected.
				elect(stream->role, nullptr);
				return;
			}
			// The specification's behaviour: no primary until a
			// client re-arbitrates; every stream is told.
			state.primary = nullptr;
			for (Stream *s : state.streams)
				send_arbitration(s, state);
		}
	}

	void stream_error(Stream *stream, StatusCode code,
			  const std::string &message,
			  const p4v1::PacketOut *packet = nullptr,
			  const p4v1::DigestListAck *ack = nullptr)
	{
		p4v1::StreamMessageResponse response;
		auto *e = response.mutable_error();
		e->set_canonical_code(code);
		e->set_message(message);
		e->set_space("p4.v1");
		if (packet != nullptr)
			*e->mutable_packet_out()->mutable_packet_out() =
				*packet;
		if (ack != nullptr)
			*e->mutable_digest_list_ack()
				 ->mutable_digest_list_ack() = *ack;
		stream->send(response);
	}

	// Caller holds mu_.
	Stream *primary_of(const std::string &role)
	{
		auto found = roles_.find(role);
		return found == roles_.end() ? nullptr : found->second.primary;
	}

	// -- packet I/O --

	void packet_out(Stream *stream, const p4v1::PacketOut &packet)
	{
		{
			std::lock_guard<std::mutex> lock(mu_);
			if (primary_of(stream->role) != stream) {
				stream_error(stream,
					     StatusCode::PERMISSION_DENIED,
					     "packet-out from a client that is "
					     "not primary",
					     &packet);
				return;
			}
		}
		const std::string &payload = packet.payload();
		rte_mbuf *mbuf = rte_pktmbuf_alloc(sw_->packet_out_pool);
		if (mbuf == nullptr || payload.size() < 14 ||
		    payload.size() > rte_pktmbuf_tailroom(mbuf)) {
			if (mbuf != nullptr)
				rte_pktmbuf_free(mbuf);
			stream_error(
				stream,
				mbuf == nullptr ? StatusCode::RESOURCE_EXHAUSTED
						: StatusCode::INVALID_ARGUMENT,
				mbuf == nullptr ? "no buffer for the packet"
						: "a packet-out must be an "
						  "Ethernet frame of at most "
						  "the buffer size",
				&packet);
			return;
		}
		std::memcpy(rte_pktmbuf_append(mbuf, (uint16_t)payload.size()),
			    payload.data(), payload.size());
		if (rte_ring_mp_enqueue(sw_->packet_out, mbuf) != 0) {
			rte_pktmbuf_free(mbuf);
			stream_error(stream, StatusCode::RESOURCE_EXHAUSTED,
				     "packet-out queue full", &packet);
		}
	}

	// -- digests --

	void digest_ack(Stream *stream, const p4v1::DigestListAck &ack)
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

	struct Outstanding {
		std::vector<std::string> items;
		uint64_t sent_ns;
	};

	p4v1::P4Data encode_digest(const sw_elephant_digest &d) const
	{
		p4v1::P4Data data;
		auto *members = data.mutable_struct_();
		auto add = [&](const uint8_t *bytes, int n) {
			Bits bits;
			std::memcpy(bits.b + 16 - n, bytes, n);
			members->add_members()->set_bitstring(canonical(bits));
		};
		auto add_u64 = [&](uint64_t v) {
			members->add_members()->set_bitstring(canonical_u64(v));
		};
		add_u64(d.ip_version);
		add(d.src_addr, 16);
		add(d.dst_addr, 16);
		add_u64(d.protocol);
		add_u64(d.src_port);
		add_u64(d.dst_port);
		add_u64(d.estimated_bytes);
		return data;
	}

	// Caller holds mu_.
	void flush_digests(uint64_t now, bool force)
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
			while (!pending_.empty() &&
			       (size_t)list->data_size() < limit) {
				*list->add_data() =
					encode_digest(pending_.front().first);
				record.items.push_back(
					list->data(list->data_size() - 1)
						.SerializeAsString());
				pending_.pop_front();
			}
			if (primary == nullptr) {
				g_digests_dropped += list->data_size();
				continue;
			}
			primary->send(message);
			if (config.ack_timeout_ns() > 0) {
				for (const auto &item : record.items)
					recent_.insert(item);
				outstanding_[list->list_id()] = record;
			}
		}
	}

	// Caller holds mu_. The most digests one list carries, and so the most
	// the server holds before it sends them.
	size_t digest_list_limit() const
	{
		int32_t size = digest_config_
				       ? digest_config_->config.max_list_size()
				       : 0;
		return size > 0 ? (size_t)size
				: (size_t)p4rt_bounds::kMaxDigestListSize;
	}

	// Caller holds mu_. Drops what an unacknowledged list already carried
	// (P4Runtime 16.2: no re-send before ack_timeout_ns).
	bool recently_sent(const sw_elephant_digest &d) const
	{
		if (recent_.empty())
			return false;
		return recent_.count(encode_digest(d).SerializeAsString()) > 0;
	}

	void expire_outstanding(uint64_t now)
	{
		if (!digest_config_)
			return;
		uint64_t timeout = digest_config_->config.ack_timeout_ns();
		for (auto it = outstanding_.begin();
		     it != outstanding_.end();) {
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

	// -- the control loop: digests, packet-in, idle timeouts --

	void control_loop()
	{
		uint64_t last_idle_scan = 0;
		while (!stopping_) {
			std::this_thread::sleep_for(
				std::chrono::milliseconds(1));
			uint64_t now = sw_now_ns();
			drain_packet_in();
			std::lock_guard<std::mutex> lock(mu_);
			sw_elephant_digest d;
			while (rte_ring_sc_dequeue_elem(sw_->digests, &d,
							sizeof(d)) == 0) {
				if (recently_sent(d))
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

	void drain_packet_in()
	{
		void *mbufs[32];
		unsigned int n;
		while ((n = rte_ring_sc_dequeue_burst(sw_->packet_in, mbufs, 32,
						      nullptr)) > 0) {
			Stream *primary;
			{
				std::lock_guard<std::mutex> lock(mu_);
				primary = primary_of("");
			}
			for (unsigned int i = 0; i < n; i++) {
				auto *mbuf = static_cast<rte_mbuf *>(mbufs[i]);
				// rte_pktmbuf_read copies only a segmented
				// packet: for a contiguous one it answers a
				// pointer into the mbuf and leaves `copy` as
				// it was.
				uint32_t length = rte_pktmbuf_pkt_len(mbuf);
				std::string copy(length, '\0');
				const void *bytes =
					primary == nullptr
						? nullptr
						: rte_pktmbuf_read(mbuf, 0,
								   length,
								   copy.data());
				if (bytes != nullptr) {
					p4v1::StreamMessageResponse message;
					message.mutable_packet()->set_payload(
						bytes, length);
					std::lock_guard<std::mutex> lock(mu_);
					if (primary_of("") == primary)
						primary->send(message);
				}
				rte_pktmbuf_free(mbuf);
			}
		}
	}

	// Caller holds mu_.
	void scan_idle(uint64_t now)
	{
		const TableInfo *flows = schema_.table("merge_flows");
		auto &entries = entries_[flows->id];
		p4v1::StreamMessageResponse message;
		auto *notification =
			message.mutable_idle_timeout_notification();
		rte_rwlock_read_lock(&sw_->lock);
		for (auto &[key, stored] : entries) {
			int64_t timeout = stored.entry.idle_timeout_ns();
			uint8_t c_key[SW_KEY_MAX];
			if (timeout <= 0)
				continue;
			flow_key(stored, c_key);
			const sw_hash_slot *slot = sw_hash_find(
				&sw_->pipeline.tables.merge_flows, c_key);
			if (slot == nullptr)
				continue;
			uint64_t hit = sw_slot_last_hit(slot);
			if (now - hit < (uint64_t)timeout)
				continue;
			// While the entry stays idle the notification is sent
			// again every idle_timeout_ns (the specification's
			// "Idle-timeout"), so a controller that lost one
			// still learns of it.
			if (stored.reported_hit == hit &&
			    now - stored.reported_ns < (uint64_t)timeout)
				continue;
			stored.reported_hit = hit;
			stored.reported_ns = now;
			*notification->add_table_entry() = stored.entry;
		}
		rte_rwlock_read_unlock(&sw_->lock);
		if (notification->table_entry_size() == 0)
			return;
		notification->set_timestamp((int64_t)now);
		Stream *primary = primary_of("");
		if (primary != nullptr)
			primary->send(message);
	}

	// -- table entries: validation --

	// Decodes and checks one match; on success `canonical` holds the
	// entry's canonical match fields.
	Status decode_match(const TableInfo &table, const p4v1::TableEntry &in,
			    std::vector<DecodedField> *fields,
			    p4v1::TableEntry *canonical_entry)
	{
		fields->assign(table.fields.size(), DecodedField());
		std::set<uint32_t> seen;
		for (const auto &m : in.match()) {
			auto it = std::find_if(
				table.fields.begin(), table.fields.end(),
				[&](const FieldInfo &f) {
					return f.id == m.field_id();
				});
			if (it == table.fields.end())
				return error(
					StatusCode::INVALID_ARGUMENT,
					"table " + table.alias +
						" has no match field id " +
						std::to_string(m.field_id()));
			if (!seen.insert(m.field_id()).second)
				return error(StatusCode::INVALID_ARGUMENT,
					     "match field " + it->name +
						     " given twice");
			size_t index = it - table.fields.begin();
			Status status =
				decode_field(table, *it, m, &(*fields)[index]);
			if (!status.ok())
				return status;
		}
		canonical_entry->clear_match();
		for (size_t i = 0; i < table.fields.size(); i++) {
			const FieldInfo &f = table.fields[i];
			const DecodedField &d = (*fields)[i];
			if (!d.present) {
				if (f.type == p4cfg::MatchField::EXACT)
					return error(
						StatusCode::INVALID_ARGUMENT,
						"exact match field " + f.name +
							" of table " +
							table.alias +
							" is missing");
				continue;
			}
			auto *m = canonical_entry->add_match();
			m->set_field_id(f.id);
			switch (f.type) {
			case p4cfg::MatchField::EXACT:
				m->mutable_exact()->set_value(
					canonical(d.value));
				break;
			case p4cfg::MatchField::LPM:
				m->mutable_lpm()->set_value(canonical(d.value));
				m->mutable_lpm()->set_prefix_len(d.prefix_len);
				break;
			case p4cfg::MatchField::TERNARY:
				m->mutable_ternary()->set_value(
					canonical(d.value));
				m->mutable_ternary()->set_mask(
					canonical(d.mask));
				break;
			case p4cfg::MatchField::RANGE:
				m->mutable_range()->set_low(canonical(d.low));
				m->mutable_range()->set_high(canonical(d.high));
				break;
			default:
				break;
			}
		}
		return Status::OK;
	}

	Status decode_field(const TableInfo &table, const FieldInfo &f,
			    const p4v1::FieldMatch &m, DecodedField *d)
	{
		std::string why;
		std::string where = "match field " + f.name + " of table " +
				    table.alias + ": ";
		auto bad = [&](const std::string &what) {
			return error(StatusCode::INVALID_ARGUMENT,
				     where + what);
		};
		d->present = true;
		switch (f.type) {
		case p4cfg::MatchField::EXACT:
			if (!m.has_exact())
				return bad("must be an exact match");
			if (!decode_bits(m.exact().value(), f.bitwidth,
					 &d->value, &why))
				return bad(why);
			return Status::OK;
		case p4cfg::MatchField::LPM: {
			if (!m.has_lpm())
				return bad("must be an LPM match");
			int length = m.lpm().prefix_len();
			if (length <= 0 || length > f.bitwidth)
				return bad("prefix length " +
					   std::to_string(length) +
					   " is outside 1.." +
					   std::to_string(f.bitwidth) +
					   " (omit the field for a "
					   "default route)");
			if (!decode_bits(m.lpm().value(), f.bitwidth, &d->value,
					 &why))
				return bad(why);
			Bits mask = prefix_mask(f.bitwidth, length);
			for (int i = 0; i < 16; i++)
				if (d->value.b[i] & ~mask.b[i])
					return bad("host bits are set beyond "
						   "the prefix length");
			d->prefix_len = length;
			return Status::OK;
		}
		case p4cfg::MatchField::TERNARY:
			if (!m.has_ternary())
				return bad("must be a ternary match");
			if (!decode_bits(m.ternary().value(), f.bitwidth,
					 &d->value, &why) ||
			    !decode_bits(m.ternary().mask(), f.bitwidth,
					 &d->mask, &why))
				return bad(why);
			if (d->mask.zero())
				return bad("an all-zero mask is a wildcard: "
					   "omit the field");
			for (int i = 0; i < 16; i++)
				if (d->value.b[i] & ~d->mask.b[i])
					return bad("value has bits outside "
						   "the mask");
			return Status::OK;
		case p4cfg::MatchField::RANGE: {
			if (!m.has_range())
				return bad("must be a range match");
			if (!decode_bits(m.range().low(), f.bitwidth, &d->low,
					 &why) ||
			    !decode_bits(m.range().high(), f.bitwidth, &d->high,
					 &why))
				return bad(why);
			if (std::memcmp(d->low.b, d->high.b, 16) > 0)
				return bad("low is above high");
			Bits full = width_mask(f.bitwidth);
			if (d->low.zero() &&
			    std::memcmp(d->high.b, full.b, 16) == 0)
				return bad("the full range is a wildcard: "
					   "omit the field");
			return Status::OK;
		}
		default:
			return bad("match kind not supported");
		}
	}

	Status decode_action(const p4v1::Action &in, DecodedAction *out,
			     p4v1::Action *canonical_action)
	{
		auto found = schema_.actions.find(in.action_id());
		if (found == schema_.actions.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown action id " +
					     std::to_string(in.action_id()));
		const ActionInfo &action = found->second;
		out->id = action.id;
		out->alias = action.alias;
		out->params.assign(action.params.size(), Bits());
		std::vector<bool> seen(action.params.size(), false);
		for (const auto &p : in.params()) {
			auto it = std::find_if(
				action.params.begin(), action.params.end(),
				[&](const ParamInfo &info) {
					return info.id == p.param_id();
				});
			if (it == action.params.end())
				return error(
					StatusCode::INVALID_ARGUMENT,
					"action " + action.alias +
						" has no parameter id " +
						std::to_string(p.param_id()));
			size_t index = it - action.params.begin();
			if (seen[index])
				return error(StatusCode::INVALID_ARGUMENT,
					     "parameter " + it->name +
						     " given twice");
			seen[index] = true;
			std::string why;
			if (!decode_bits(p.value(), it->bitwidth,
					 &out->params[index], &why))
				return error(StatusCode::INVALID_ARGUMENT,
					     "parameter " + it->name +
						     " of action " +
						     action.alias + ": " + why);
		}
		for (size_t i = 0; i < seen.size(); i++)
			if (!seen[i])
				return error(
					StatusCode::INVALID_ARGUMENT,
					"parameter " + action.params[i].name +
						" of action " + action.alias +
						" is missing");
		canonical_action->Clear();
		canonical_action->set_action_id(action.id);
		for (size_t i = 0; i < action.params.size(); i++) {
			auto *p = canonical_action->add_params();
			p->set_param_id(action.params[i].id);
			p->set_value(canonical(out->params[i]));
		}
		return Status::OK;
	}

	// The canonical key of an entry within its table.
	static std::string entry_key(const p4v1::TableEntry &canonical_entry)
	{
		p4v1::TableEntry key;
		*key.mutable_match() = canonical_entry.match();
		key.set_priority(canonical_entry.priority());
		return key.SerializeAsString();
	}

	// -- table entries: writing --

	Status write_one(const p4v1::Update &update)
	{
		const auto &entity = update.entity();
		switch (entity.entity_case()) {
		case p4v1::Entity::kTableEntry:
			return write_table_entry(update.type(),
						 entity.table_entry());
		case p4v1::Entity::kActionProfileMember:
			return write_member(update.type(),
					    entity.action_profile_member());
		case p4v1::Entity::kActionProfileGroup:
			return write_group(update.type(),
					   entity.action_profile_group());
		case p4v1::Entity::kMeterEntry:
			return write_meter(update.type(), entity.meter_entry());
		case p4v1::Entity::kCounterEntry:
			return write_counter(update.type(),
					     entity.counter_entry());
		case p4v1::Entity::kDigestEntry:
			return write_digest(update.type(),
					    entity.digest_entry());
		case p4v1::Entity::kPacketReplicationEngineEntry:
			return pre_.write(
				update.type(),
				entity.packet_replication_engine_entry());
		case p4v1::Entity::ENTITY_NOT_SET:
			return error(StatusCode::INVALID_ARGUMENT,
				     "update without an entity");
		default:
			return error(StatusCode::UNIMPLEMENTED,
				     "this switch does not write that kind "
				     "of entity");
		}
	}

	Status write_table_entry(p4v1::Update::Type type,
				 const p4v1::TableEntry &in)
	{
		auto found = schema_.tables.find(in.table_id());
		if (found == schema_.tables.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown table id " +
					     std::to_string(in.table_id()));
		const TableInfo &table = found->second;
		if (type == p4v1::Update::UNSPECIFIED)
			return error(StatusCode::INVALID_ARGUMENT,
				     "update type is unspecified");
		if (in.is_default_action())
			return write_default(type, table, in);
		if (table.fields.empty())
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no key: only its default "
					     "entry can be written");
		if (table.needs_priority && in.priority() <= 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " needs a priority above 0");
		if (!table.needs_priority && in.priority() != 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " takes no priority");
		if (in.idle_timeout_ns() != 0 && !table.idle_timeout)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no idle timeout");
		if (in.idle_timeout_ns() < 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "idle_timeout_ns is negative");
		if (in.has_time_since_last_hit() && !table.idle_timeout)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no idle timeout: no "
					     "time_since_last_hit");
		if (in.has_meter_config() || in.has_counter_data() ||
		    in.has_meter_counter_data())
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no direct counter or meter");
		StoredEntry stored;
		stored.entry.set_table_id(table.id);
		stored.entry.set_priority(in.priority());
		Status status =
			decode_match(table, in, &stored.fields, &stored.entry);
		if (!status.ok())
			return status;
		auto &entries = entries_[table.id];
		std::string key = entry_key(stored.entry);
		auto existing = entries.find(key);
		status = check_presence(type, existing != entries.end(),
					"such entry in table " + table.alias);
		if (!status.ok())
			return status;
		if (type == p4v1::Update::DELETE) {
			apply_entry(table, existing->second, true);
			entries.erase(existing);
			one_shot_entries_.erase(key);
			if (table.kind == Table::NextHops)
				rebuild_next_hops();
			if (table.kind == Table::MergeServices)
				rebuild_services(table);
			return Status::OK;
		}
		if (type == p4v1::Update::INSERT &&
		    (int64_t)entries.size() >= table.size)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "table " + table.alias + " is full (" +
					     std::to_string(table.size) +
					     " entries)");
		if (type == p4v1::Update::MODIFY && !in.has_action()) {
			// No action in a MODIFY keeps the entry's action
			// (P4Runtime 9.1): only what else it names changes.
			stored.action = existing->second.action;
			stored.one_shot = existing->second.one_shot;
			*stored.entry.mutable_action() =
				existing->second.entry.action();
		} else {
			status = decode_table_action(table, in, &stored);
			if (!status.ok())
				return status;
		}
		stored.entry.set_idle_timeout_ns(in.idle_timeout_ns());
		// Opaque to the switch: kept and read back as written.
		stored.entry.set_metadata(in.metadata());
		// controller_metadata is deprecated in p4runtime.proto in
		// favour of metadata, yet still a field a client may set and
		// read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		stored.entry.set_controller_metadata(in.controller_metadata());
#pragma GCC diagnostic pop
		if (existing != entries.end())
			existing->second = stored;
		else
			entries[key] = stored;
		if (stored.entry.action().has_action_profile_action_set())
			one_shot_entries_.insert(key);
		else
			one_shot_entries_.erase(key);
		apply_entry(table, entries[key], false);
		if (table.kind == Table::NextHops)
			rebuild_next_hops();
		if (table.kind == Table::MergeServices)
			rebuild_services(table);
		return Status::OK;
	}

	Status decode_table_action(const TableInfo &table,
				   const p4v1::TableEntry &in,
				   StoredEntry *stored)
	{
		const auto &action = in.action();
		if (table.action_profile != 0) {
			if (action.has_action_profile_action_set())
				return decode_one_shot(table, action, stored);
			if (!one_shot_entries_.empty())
				return error(StatusCode::INVALID_ARGUMENT,
					     kMixedProfile);
			if (action.has_action_profile_member_id()) {
				if (!members_.count(
					    action.action_profile_member_id()))
					return error(
						StatusCode::NOT_FOUND,
						"no action profile member " +
							std::to_string(
								action.action_profile_member_id()));
			} else if (action.has_action_profile_group_id()) {
				if (!groups_.count(
					    action.action_profile_group_id()))
					return error(
						StatusCode::NOT_FOUND,
						"no action profile group " +
							std::to_string(
								action.action_profile_group_id()));
			} else {
				return error(StatusCode::INVALID_ARGUMENT,
					     "table " + table.alias +
						     " takes an action profile "
						     "member or group id");
			}
			*stored->entry.mutable_action() = action;
			return Status::OK;
		}
		if (!action.has_action())
			return error(StatusCode::INVALID_ARGUMENT,
				     "entry of table " + table.alias +
					     " has no action");
		if (!table.actions.count(action.action().action_id()))
			return error(
				StatusCode::INVALID_ARGUMENT,
				"action id " +
					std::to_string(
						action.action().action_id()) +
					" is not an action of table " +
					table.alias);
		if (table.default_only.count(action.action().action_id()))
			return error(StatusCode::INVALID_ARGUMENT,
				     "that action is only a default action of "
				     "table " +
					     table.alias);
		return decode_action(
			action.action(), &stored->action,
			stored->entry.mutable_action()->mutable_action());
	}

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
			       StoredEntry *stored)
	{
		if (!members_.empty() || !groups_.empty())
			return error(StatusCode::INVALID_ARGUMENT,
				     kMixedProfile);
		const auto &set = action.action_profile_action_set();
		if (set.action_profile_actions_size() == 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "an empty one-shot action set");
		const int64_t max_size = schema_.ecmp_max_group_size > 0
						 ? schema_.ecmp_max_group_size
						 : schema_.ecmp_size;
		int64_t total = 0;
		auto *out = stored->entry.mutable_action()
				    ->mutable_action_profile_action_set();
		for (const auto &a : set.action_profile_actions()) {
			if (a.weight() <= 0 ||
			    a.weight() > p4rt_bounds::kMaxMemberWeight)
				return error(
					StatusCode::INVALID_ARGUMENT,
					"a one-shot action's weight is 1.." +
						std::to_string(
							p4rt_bounds::
								kMaxMemberWeight) +
						", got " +
						std::to_string(a.weight()));
			if (a.watch_kind_case() !=
			    p4v1::ActionProfileAction::WATCH_KIND_NOT_SET)
				return error(StatusCode::UNIMPLEMENTED,
					     "watch ports are not supported");
			total += a.weight();
			DecodedAction decoded;
			auto *canonical_action =
				out->add_action_profile_actions();
			canonical_action->set_weight(a.weight());
			Status status = decode_action(
				a.action(), &decoded,
				canonical_action->mutable_action());
			if (!status.ok())
				return status;
			if (decoded.alias != "set_next_hop")
				return error(StatusCode::INVALID_ARGUMENT,
					     "table " + table.alias +
						     " takes set_next_hop");
			stored->one_shot.push_back(
				{hop_of(decoded), a.weight()});
		}
		if (total > max_size)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "the one-shot weights add up to " +
					     std::to_string(total) +
					     ", above the " +
					     std::to_string(max_size) +
					     " this switch holds in a group");
		return Status::OK;
	}

	// The next hop of a decoded set_next_hop.
	sw_next_hop hop_of(const DecodedAction &action)
	{
		const ActionInfo &info = schema_.actions[action.id];
		sw_next_hop hop = {};
		for (size_t i = 0; i < info.params.size(); i++) {
			const auto &name = info.params[i].name;
			if (name == "port")
				hop.port = (uint16_t)action.params[i].u64();
			else if (name == "src_mac")
				std::memcpy(hop.src_mac,
					    action.params[i].tail(6), 6);
			else if (name == "dst_mac")
				std::memcpy(hop.dst_mac,
					    action.params[i].tail(6), 6);
		}
		return hop;
	}

	// Copies one entry into the C table (or removes it). Validation is
	// done: this cannot fail except for capacity, which the server
	// checks first against the same size.
	void apply_entry(const TableInfo &table, const StoredEntry &stored,
			 bool remove)
	{
		sw_tables *t = &sw_->pipeline.tables;
		const auto &f = stored.fields;
		uint64_t value = stored.action.params.empty()
					 ? 0
					 : stored.action.params[0].u64();
		uint8_t key[SW_KEY_MAX] = {};
		switch (table.kind) {
		case Table::PortRoles:
			t->port_role[f[0].value.u64() % SW_PORTS] =
				remove ? P4_PORT_ROLE_UNASSIGNED
				       : (uint8_t)value;
			break;
		case Table::InstancesV4:
		case Table::InstancesV6: {
			bool v4 = table.kind == Table::InstancesV4;
			sw_hash *hash =
				v4 ? &t->instances_v4 : &t->instances_v6;
			std::memcpy(key, f[0].value.tail(v4 ? 4 : 16),
				    v4 ? 4 : 16);
			if (remove)
				sw_hash_remove(hash, key);
			else
				sw_hash_put(hash, key, value, sw_now_ns());
			break;
		}
		case Table::PathMtuV4:
		case Table::PathMtuV6:
		case Table::RoutesV4:
		case Table::RoutesV6: {
			bool v4 = table.kind == Table::PathMtuV4 ||
				  table.kind == Table::RoutesV4;
			sw_lpm *lpm =
				table.kind == Table::PathMtuV4 ? &t->path_mtu_v4
				: table.kind == Table::PathMtuV6
					? &t->path_mtu_v6
				: table.kind == Table::RoutesV4 ? &t->routes_v4
								: &t->routes_v6;
			const uint8_t *addr = f[0].value.tail(v4 ? 4 : 16);
			if (remove)
				sw_lpm_remove(lpm, addr, f[0].prefix_len);
			else
				sw_lpm_put(lpm, addr, f[0].prefix_len, value);
			break;
		}
		case Table::MergeFlows:
			flow_key(stored, key);
			if (remove)
				sw_hash_remove(&t->merge_flows, key);
			else
				sw_hash_put(&t->merge_flows, key,
					    (uint64_t)stored.entry
						    .idle_timeout_ns(),
					    sw_now_ns());
			break;
		default:
			// merge_services and next_hops are rebuilt whole.
			break;
		}
	}

	// The merge_flows key bytes (pipeline.c's flow_key) from an entry's
	// fields, ordered by the P4Info field names.
	void flow_key(const StoredEntry &stored, uint8_t key[SW_KEY_MAX])
	{
		const TableInfo *table = schema_.table("merge_flows");
		std::memset(key, 0, SW_KEY_MAX);
		for (size_t i = 0; i < table->fields.size(); i++) {
			const std::string &name = table->fields[i].name;
			const Bits &v = stored.fields[i].value;
			if (name == "ip_version")
				key[0] = (uint8_t)v.u64();
			else if (name == "src_addr")
				std::memcpy(key + 1, v.tail(16), 16);
			else if (name == "dst_addr")
				std::memcpy(key + 17, v.tail(16), 16);
			else if (name == "protocol")
				key[33] = (uint8_t)v.u64();
			else if (name == "src_port")
				std::memcpy(key + 34, v.tail(2), 2);
			else if (name == "dst_port")
				std::memcpy(key + 36, v.tail(2), 2);
		}
	}

	void rebuild_services(const TableInfo &table)
	{
		std::vector<sw_service_rule> rules;
		for (const auto &[key, stored] : entries_[table.id]) {
			sw_service_rule rule{};
			rule.port_lo = 0;
			rule.port_hi = 0xffff;
			for (size_t i = 0; i < table.fields.size(); i++) {
				const auto &d = stored.fields[i];
				const std::string &name = table.fields[i].name;
				if (!d.present)
					continue;
				if (name == "ip_version") {
					rule.ip_version =
						(uint8_t)d.value.u64();
				} else if (name == "dst_addr") {
					std::memcpy(rule.addr, d.value.b, 16);
					std::memcpy(rule.mask, d.mask.b, 16);
				} else if (name == "dst_port") {
					rule.port_lo = (uint16_t)d.low.u64();
					rule.port_hi = (uint16_t)d.high.u64();
				}
			}
			rule.priority = stored.entry.priority();
			rules.push_back(rule);
		}
		sw_ternary_set(&sw_->pipeline.tables.merge_services,
			       rules.data(), (uint32_t)rules.size());
	}

	Status write_default(p4v1::Update::Type type, const TableInfo &table,
			     const p4v1::TableEntry &in)
	{
		if (type != p4v1::Update::MODIFY)
			return error(StatusCode::INVALID_ARGUMENT,
				     "a default entry can only be modified");
		if (in.match_size() > 0 || in.priority() != 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "a default entry has no match and no "
				     "priority");
		if (in.idle_timeout_ns() != 0 || in.has_time_since_last_hit())
			return error(StatusCode::INVALID_ARGUMENT,
				     "a default entry never ages: no "
				     "idle_timeout_ns");
		if (table.const_default_action != 0)
			return error(StatusCode::PERMISSION_DENIED,
				     "table " + table.alias +
					     " has a const default action");
		if (table.action_profile != 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no default entry (action "
					     "selector)");
		StoredEntry stored;
		stored.entry.set_table_id(table.id);
		stored.entry.set_is_default_action(true);
		if (!in.has_action()) {
			// Back to the program's default action.
			defaults_.erase(table.id);
			apply_default(table, initial_default(table));
			return Status::OK;
		}
		const auto &action = in.action();
		if (!action.has_action())
			return error(
				StatusCode::INVALID_ARGUMENT,
				"a default action must be a direct action");
		if (!table.actions.count(action.action().action_id()) ||
		    table.table_only.count(action.action().action_id()))
			return error(
				StatusCode::INVALID_ARGUMENT,
				"action id " +
					std::to_string(
						action.action().action_id()) +
					" cannot be the default action of "
					"table " +
					table.alias);
		Status status = decode_action(
			action.action(), &stored.action,
			stored.entry.mutable_action()->mutable_action());
		if (!status.ok())
			return status;
		defaults_[table.id] = stored;
		apply_default(table, stored.action);
		return Status::OK;
	}

	DecodedAction initial_default(const TableInfo &table)
	{
		DecodedAction action;
		auto found = kInitialDefaults.find(table.alias);
		if (found == kInitialDefaults.end())
			return action;
		action.alias = found->second.first;
		action.id = schema_.action_ids[action.alias];
		const ActionInfo &info = schema_.actions[action.id];
		action.params.assign(info.params.size(), Bits());
		for (const auto &[name, value] : found->second.second)
			for (size_t i = 0; i < info.params.size(); i++)
				if (info.params[i].name == name) {
					Bits bits;
					uint64_t v = value;
					for (int b = 15; b >= 8; b--, v >>= 8)
						bits.b[b] = (uint8_t)v;
					action.params[i] = bits;
				}
		return action;
	}

	p4v1::TableEntry default_entry(const TableInfo &table)
	{
		auto found = defaults_.find(table.id);
		if (found != defaults_.end())
			return found->second.entry;
		p4v1::TableEntry entry;
		entry.set_table_id(table.id);
		entry.set_is_default_action(true);
		uint32_t action_id = table.const_default_action;
		DecodedAction initial;
		if (action_id == 0) {
			initial = initial_default(table);
			action_id = initial.id;
		}
		if (action_id == 0)
			return entry;
		auto *action = entry.mutable_action()->mutable_action();
		action->set_action_id(action_id);
		const ActionInfo &info = schema_.actions[action_id];
		for (size_t i = 0; i < info.params.size(); i++) {
			auto *p = action->add_params();
			p->set_param_id(info.params[i].id);
			p->set_value(i < initial.params.size()
					     ? canonical(initial.params[i])
					     : std::string(1, '\0'));
		}
		return entry;
	}

	void apply_default(const TableInfo &table, const DecodedAction &action)
	{
		sw_tables *t = &sw_->pipeline.tables;
		auto param = [&](size_t i) {
			return i < action.params.size() ? action.params[i]
							: Bits();
		};
		const std::string &name = action.alias;
		switch (table.kind) {
		case Table::DepthPolicy:
			t->depth_forward = name == "forward_too_deep";
			break;
		case Table::NicPort:
			t->nic_port = name == "set_nic_port"
					      ? (int32_t)param(0).u64()
					      : -1;
			break;
		case Table::FleetPolicy:
			t->fleet_jumbo = param(0).u64() != 0;
			t->guest_jumbo_mtu = (uint16_t)param(1).u64();
			t->default_mtu = (uint16_t)param(2).u64();
			break;
		case Table::PathMtuV4:
			t->path_mtu_default_v4 = (uint16_t)param(0).u64();
			break;
		case Table::PathMtuV6:
			t->path_mtu_default_v6 = (uint16_t)param(0).u64();
			break;
		case Table::ElephantConfig:
			t->elephant_threshold = (uint32_t)param(0).u64();
			break;
		case Table::SignalSource: {
			const ActionInfo &info = schema_.actions[action.id];
			t->signal.configured = name == "set_signal_source";
			for (size_t i = 0; i < info.params.size(); i++) {
				if (info.params[i].name == "ipv4")
					std::memcpy(t->signal.ipv4,
						    param(i).tail(4), 4);
				else if (info.params[i].name == "ipv6")
					std::memcpy(t->signal.ipv6,
						    param(i).tail(16), 16);
			}
			break;
		}
		default:
			break;
		}
	}

	// -- action profile members and groups (ecmp_selector) --

	Status write_member(p4v1::Update::Type type,
			    const p4v1::ActionProfileMember &in)
	{
		if (in.action_profile_id() != schema_.ecmp_selector)
			return error(
				StatusCode::INVALID_ARGUMENT,
				"unknown action profile id " +
					std::to_string(in.action_profile_id()));
		if (!one_shot_entries_.empty())
			return error(StatusCode::INVALID_ARGUMENT,
				     kMixedProfile);
		auto existing = members_.find(in.member_id());
		Status status = check_presence(
			type, existing != members_.end(),
			"member " + std::to_string(in.member_id()));
		if (!status.ok())
			return status;
		if (type == p4v1::Update::DELETE) {
			if (member_in_use(in.member_id()))
				return error(
					StatusCode::FAILED_PRECONDITION,
					"member " +
						std::to_string(in.member_id()) +
						" is still used by a group "
						"or table entry");
			members_.erase(existing);
			return Status::OK;
		}
		if (type == p4v1::Update::INSERT &&
		    (int64_t)members_.size() >= schema_.ecmp_size)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "the action profile is full");
		Member member;
		DecodedAction action;
		member.member.set_action_profile_id(in.action_profile_id());
		member.member.set_member_id(in.member_id());
		status = decode_action(in.action(), &action,
				       member.member.mutable_action());
		if (!status.ok())
			return status;
		if (action.alias != "set_next_hop")
			return error(StatusCode::INVALID_ARGUMENT,
				     "members of ecmp_selector take "
				     "set_next_hop");
		member.hop = hop_of(action);
		members_[in.member_id()] = member;
		rebuild_next_hops();
		return Status::OK;
	}

	bool member_in_use(uint32_t member_id)
	{
		for (const auto &[id, group] : groups_)
			for (const auto &m : group.group.members())
				if (m.member_id() == member_id)
					return true;
		const TableInfo *hops = schema_.table("next_hops");
		for (const auto &[key, stored] : entries_[hops->id])
			if (stored.entry.action()
				    .has_action_profile_member_id() &&
			    stored.entry.action().action_profile_member_id() ==
				    member_id)
				return true;
		return false;
	}

	Status write_group(p4v1::Update::Type type,
			   const p4v1::ActionProfileGroup &in)
	{
		if (in.action_profile_id() != schema_.ecmp_selector)
			return error(
				StatusCode::INVALID_ARGUMENT,
				"unknown action profile id " +
					std::to_string(in.action_profile_id()));
		if (!one_shot_entries_.empty())
			return error(StatusCode::INVALID_ARGUMENT,
				     kMixedProfile);
		auto existing = groups_.find(in.group_id());
		Status status = check_presence(
			type, existing != groups_.end(),
			"group " + std::to_string(in.group_id()));
		if (!status.ok())
			return status;
		if (type == p4v1::Update::DELETE) {
			const TableInfo *hops = schema_.table("next_hops");
			for (const auto &[key, stored] : entries_[hops->id])
				if (stored.entry.action()
					    .has_action_profile_group_id() &&
				    stored.entry.action()
						    .action_profile_group_id() ==
					    in.group_id())
					return error(
						StatusCode::FAILED_PRECONDITION,
						"group " +
							std::to_string(
								in.group_id()) +
							" is still used by a "
							"table entry");
			groups_.erase(existing);
			return Status::OK;
		}
		// A group's max_size is fixed when it is inserted (P4Runtime
		// 9.2.2): a MODIFY naming another is INVALID_ARGUMENT.
		if (type == p4v1::Update::MODIFY &&
		    in.max_size() != existing->second.group.max_size())
			return error(
				StatusCode::INVALID_ARGUMENT,
				"max_size of group " +
					std::to_string(in.group_id()) + " is " +
					std::to_string(existing->second.group
							       .max_size()) +
					" and cannot change (asked " +
					std::to_string(in.max_size()) + ")");
		// The most this switch holds in one group (sum of weights):
		// the P4Info's max_group_size, else the profile's size.
		const int64_t target_max = schema_.ecmp_max_group_size > 0
						   ? schema_.ecmp_max_group_size
						   : schema_.ecmp_size;
		int64_t max_size =
			in.max_size() > 0 ? in.max_size() : target_max;
		if (schema_.ecmp_max_group_size > 0 &&
		    max_size > schema_.ecmp_max_group_size)
			return error(
				StatusCode::INVALID_ARGUMENT,
				"max_size " + std::to_string(max_size) +
					" is above the profile's " +
					std::to_string(
						schema_.ecmp_max_group_size));
		// P4Runtime's rules on max_size: a size the target cannot
		// hold is RESOURCE_EXHAUSTED.
		if (max_size > target_max)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "max_size " + std::to_string(max_size) +
					     " is above the " +
					     std::to_string(target_max) +
					     " this switch holds in a group");
		int64_t total = 0;
		std::set<uint32_t> seen;
		for (const auto &m : in.members()) {
			if (!members_.count(m.member_id()))
				return error(
					StatusCode::NOT_FOUND,
					"no member " +
						std::to_string(m.member_id()));
			if (!seen.insert(m.member_id()).second)
				return error(
					StatusCode::INVALID_ARGUMENT,
					"member " +
						std::to_string(m.member_id()) +
						" listed twice");
			if (m.weight() <= 0)
				return error(
					StatusCode::INVALID_ARGUMENT,
					"member " +
						std::to_string(m.member_id()) +
						" has weight " +
						std::to_string(m.weight()) +
						": a weight is positive");
			if (m.weight() > p4rt_bounds::kMaxMemberWeight)
				return error(
					StatusCode::RESOURCE_EXHAUSTED,
					"weight " + std::to_string(m.weight()) +
						" is above the " +
						std::to_string(
							p4rt_bounds::
								kMaxMemberWeight) +
						" this switch takes for a "
						"member");
			total += m.weight();
		}
		if (max_size > 0 && total > max_size)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "the group's weights add up to " +
					     std::to_string(total) +
					     ", above its max_size " +
					     std::to_string(max_size));
		if (type == p4v1::Update::INSERT &&
		    (int64_t)groups_.size() >= schema_.ecmp_size)
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     "the action profile has no room for "
				     "another group");
		Group group;
		group.group = in;
		group.group.set_max_size(in.max_size());
		groups_[in.group_id()] = group;
		rebuild_next_hops();
		return Status::OK;
	}

	// next_hops in the C pipeline: each entry's hop set, members in
	// member-id order with weights expanded (BMv2 picks hash % size over
	// its members, ordered by handle, which follows creation order).
	void rebuild_next_hops()
	{
		sw_tables *t = &sw_->pipeline.tables;
		const TableInfo *hops = schema_.table("next_hops");
		std::set<uint32_t> present;
		for (const auto &[key, stored] : entries_[hops->id]) {
			uint32_t group_id =
				(uint32_t)stored.fields[0].value.u64() & 0xffff;
			std::vector<sw_next_hop> list;
			const auto &action = stored.entry.action();
			if (action.has_action_profile_action_set()) {
				for (const auto &[hop, weight] :
				     stored.one_shot)
					for (int32_t w = 0; w < weight; w++)
						list.push_back(hop);
			} else if (action.has_action_profile_member_id()) {
				auto m = members_.find(
					action.action_profile_member_id());
				if (m != members_.end())
					list.push_back(m->second.hop);
			} else {
				auto g = groups_.find(
					action.action_profile_group_id());
				if (g != groups_.end()) {
					std::vector<std::pair<uint32_t, int>>
						order;
					for (const auto &m :
					     g->second.group.members())
						order.push_back(
							{m.member_id(),
							 m.weight() > 0
								 ? m.weight()
								 : 1});
					std::sort(order.begin(), order.end());
					for (const auto &[id, weight] : order)
						for (int w = 0; w < weight; w++)
							list.push_back(
								members_[id]
									.hop);
				}
			}
			auto *set = static_cast<sw_hop_set *>(std::calloc(
				1, sizeof(sw_hop_set) +
					   list.size() * sizeof(sw_next_hop)));
			if (set == nullptr)
				continue;
			set->count = (uint32_t)list.size();
			std::copy(list.begin(), list.end(), set->hops);
			std::free(t->next_hops[group_id]);
			t->next_hops[group_id] = set;
			present.insert(group_id);
		}
		for (uint32_t i = 0; i < (1u << 16); i++)
			if (t->next_hops[i] != nullptr && !present.count(i)) {
				std::free(t->next_hops[i]);
				t->next_hops[i] = nullptr;
			}
	}

	// -- meters, counters, digests --

	// The pipeline's cells of a meter of the schema.
	struct sw_meter *meter_cells(uint32_t meter_id)
	{
		const auto &alias = schema_.meters.at(meter_id).first;
		return alias == "icmp_source_meter"
			       ? sw_->pipeline.icmp_source_meter
			       : sw_->pipeline.icmp_signal_meter;
	}

	Status write_meter(p4v1::Update::Type type, const p4v1::MeterEntry &in)
	{
		auto meter = schema_.meters.find(in.meter_id());
		if (meter == schema_.meters.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown meter id " +
					     std::to_string(in.meter_id()));
		const int64_t size = meter->second.second;
		if (type != p4v1::Update::MODIFY)
			return error(StatusCode::INVALID_ARGUMENT,
				     "meter entries can only be modified");
		if (!in.has_index())
			return error(StatusCode::INVALID_ARGUMENT,
				     "a meter write needs an index");
		int64_t index = in.index().index();
		if (index < 0 || index >= size)
			return error(StatusCode::OUT_OF_RANGE,
				     "meter index " + std::to_string(index) +
					     " is outside 0.." +
					     std::to_string(size - 1));
		const auto &c = in.config();
		if (in.has_config() &&
		    (c.cir() < 0 || c.cburst() < 0 || c.pir() < 0 ||
		     c.pburst() < 0 || c.cir() > c.pir()))
			return error(StatusCode::INVALID_ARGUMENT,
				     "meter rates and bursts must be positive "
				     "with cir <= pir");
		if (in.has_config() && (c.pir() == 0 || c.pburst() == 0))
			return error(StatusCode::INVALID_ARGUMENT,
				     "a configured meter needs pir and pburst "
				     "above 0");
		sw_meter_set(&meter_cells(in.meter_id())[index],
			     (uint64_t)c.cir(), (uint64_t)c.cburst(),
			     (uint64_t)c.pir(), (uint64_t)c.pburst(),
			     sw_now_ns());
		if (in.has_config())
			meters_[{in.meter_id(), index}] = c;
		else
			meters_.erase({in.meter_id(), index});
		return Status::OK;
	}

	Status write_counter(p4v1::Update::Type type,
			     const p4v1::CounterEntry &in)
	{
		auto found = schema_.counters.find(in.counter_id());
		if (found == schema_.counters.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown counter id " +
					     std::to_string(in.counter_id()));
		if (type != p4v1::Update::MODIFY)
			return error(StatusCode::INVALID_ARGUMENT,
				     "counter entries can only be modified");
		if (!in.has_index())
			return error(StatusCode::INVALID_ARGUMENT,
				     "a counter write needs an index");
		int64_t index = in.index().index();
		if (index < 0 || index >= found->second.second)
			return error(StatusCode::OUT_OF_RANGE,
				     "counter index out of range");
		sw_packets_bytes value = {(uint64_t)in.data().packet_count(),
					  (uint64_t)in.data().byte_count()};
		sw_counter_write(&sw_->pipeline, sw_->worker_count,
				 found->second.first, (uint32_t)index, value);
		return Status::OK;
	}

	Status write_digest(p4v1::Update::Type type,
			    const p4v1::DigestEntry &in)
	{
		if (in.digest_id() != schema_.elephant_digest)
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown digest id " +
					     std::to_string(in.digest_id()));
		Status status = check_presence(type, digest_config_.has_value(),
					       "config of the elephant digest");
		if (!status.ok())
			return status;
		if (type == p4v1::Update::DELETE) {
			digest_config_.reset();
			return Status::OK;
		}
		const auto &c = in.config();
		if (c.max_timeout_ns() < 0 || c.max_list_size() < 0 ||
		    c.ack_timeout_ns() < 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "digest timeouts and sizes must not be "
				     "negative");
		if (c.max_timeout_ns() > p4rt_bounds::kMaxDigestTimeoutNs ||
		    c.max_list_size() > p4rt_bounds::kMaxDigestListSize)
			return error(
				StatusCode::INVALID_ARGUMENT,
				"max_timeout_ns is at most " +
					std::to_string(
						p4rt_bounds::
							kMaxDigestTimeoutNs) +
					" and max_list_size at most " +
					std::to_string(
						p4rt_bounds::
							kMaxDigestListSize) +
					" here");
		digest_config_ = DigestConfig{c};
		return Status::OK;
	}

	// -- Read --

	Status read_one(const p4v1::Entity &entity,
			std::vector<p4v1::Entity> *out)
	{
		switch (entity.entity_case()) {
		case p4v1::Entity::kTableEntry:
			return read_table_entries(entity.table_entry(), out);
		case p4v1::Entity::kActionProfileMember: {
			const auto &q = entity.action_profile_member();
			if (q.action_profile_id() != 0 &&
			    q.action_profile_id() != schema_.ecmp_selector)
				return error(StatusCode::INVALID_ARGUMENT,
					     "unknown action profile id");
			for (const auto &[id, m] : members_)
				if (q.member_id() == 0 || q.member_id() == id)
					*out->emplace_back()
						 .mutable_action_profile_member() =
						m.member;
			return Status::OK;
		}
		case p4v1::Entity::kActionProfileGroup: {
			const auto &q = entity.action_profile_group();
			if (q.action_profile_id() != 0 &&
			    q.action_profile_id() != schema_.ecmp_selector)
				return error(StatusCode::INVALID_ARGUMENT,
					     "unknown action profile id");
			for (const auto &[id, g] : groups_)
				if (q.group_id() == 0 || q.group_id() == id)
					*out->emplace_back()
						 .mutable_action_profile_group() =
						g.group;
			return Status::OK;
		}
		case p4v1::Entity::kCounterEntry:
			return read_counters(entity.counter_entry(), out);
		case p4v1::Entity::kMeterEntry: {
			const auto &q = entity.meter_entry();
			if (q.meter_id() != 0 &&
			    !schema_.meters.count(q.meter_id()))
				return error(StatusCode::INVALID_ARGUMENT,
					     "unknown meter id");
			if (q.meter_id() == 0 && q.has_index())
				return error(StatusCode::INVALID_ARGUMENT,
					     "a meter read with an index needs "
					     "its meter id");
			for (const auto &[id, meter] : schema_.meters) {
				if (q.meter_id() != 0 && q.meter_id() != id)
					continue;
				int64_t first = 0, last = meter.second - 1;
				if (q.has_index()) {
					if (q.index().index() < 0 ||
					    q.index().index() > last)
						return error(
							StatusCode::
								OUT_OF_RANGE,
							"meter index out of "
							"range");
					first = last = q.index().index();
				}
				for (int64_t i = first; i <= last; i++) {
					auto *m =
						out->emplace_back()
							.mutable_meter_entry();
					m->set_meter_id(id);
					m->mutable_index()->set_index(i);
					auto c = meters_.find({id, i});
					if (c != meters_.end())
						*m->mutable_config() =
							c->second;
				}
			}
			return Status::OK;
		}
		case p4v1::Entity::kDigestEntry: {
			const auto &q = entity.digest_entry();
			if (q.digest_id() != 0 &&
			    q.digest_id() != schema_.elephant_digest)
				return error(StatusCode::INVALID_ARGUMENT,
					     "unknown digest id");
			if (digest_config_) {
				auto *d = out->emplace_back()
						  .mutable_digest_entry();
				d->set_digest_id(schema_.elephant_digest);
				*d->mutable_config() = digest_config_->config;
			}
			return Status::OK;
		}
		case p4v1::Entity::kPacketReplicationEngineEntry:
			pre_.read(entity.packet_replication_engine_entry(),
				  out);
			return Status::OK;
		case p4v1::Entity::kRegisterEntry:
			return error(StatusCode::UNIMPLEMENTED,
				     "registers are not readable over "
				     "P4Runtime (as on BMv2)");
		case p4v1::Entity::ENTITY_NOT_SET:
			return error(StatusCode::INVALID_ARGUMENT,
				     "an entity of the read is empty");
		default:
			return error(StatusCode::UNIMPLEMENTED,
				     "this switch does not read that kind of "
				     "entity");
		}
	}

	Status read_table_entries(const p4v1::TableEntry &q,
				  std::vector<p4v1::Entity> *out)
	{
		if (q.table_id() != 0 && !schema_.tables.count(q.table_id()))
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown table id " +
					     std::to_string(q.table_id()));
		if (q.table_id() != 0 && q.has_time_since_last_hit() &&
		    !schema_.tables.at(q.table_id()).idle_timeout)
			return error(
				StatusCode::INVALID_ARGUMENT,
				"table " +
					schema_.tables.at(q.table_id()).alias +
					" has no idle timeout: no "
					"time_since_last_hit");
		// A read filters on what it sets (P4Runtime 11.1): the match
		// (with its priority), the priority alone, the action id.
		const uint32_t action_filter =
			q.action().has_action()
				? q.action().action().action_id()
				: 0;
		uint64_t now = sw_now_ns();
		for (const auto &[id, table] : schema_.tables) {
			if (q.table_id() != 0 && q.table_id() != id)
				continue;
			if (q.is_default_action()) {
				if (table.action_profile == 0)
					*out->emplace_back()
						 .mutable_table_entry() =
						default_entry(table);
				continue;
			}
			std::string only;
			if (q.match_size() > 0) {
				if (q.table_id() == 0)
					return error(
						StatusCode::INVALID_ARGUMENT,
						"a match needs a table id");
				StoredEntry probe;
				probe.entry.set_priority(q.priority());
				Status status = decode_match(
					table, q, &probe.fields, &probe.entry);
				if (!status.ok())
					return status;
				only = entry_key(probe.entry);
			}
			for (auto &[key, stored] : entries_[id]) {
				if (!only.empty() && key != only)
					continue;
				if (only.empty() && q.priority() != 0 &&
				    stored.entry.priority() != q.priority())
					continue;
				if (action_filter != 0 &&
				    (!stored.entry.action().has_action() ||
				     stored.entry.action()
						     .action()
						     .action_id() !=
					     action_filter))
					continue;
				auto *entry = out->emplace_back()
						      .mutable_table_entry();
				*entry = stored.entry;
				if (q.has_time_since_last_hit() &&
				    table.kind == Table::MergeFlows) {
					uint8_t c_key[SW_KEY_MAX];
					flow_key(stored, c_key);
					const sw_hash_slot *slot = sw_hash_find(
						&sw_->pipeline.tables
							 .merge_flows,
						c_key);
					uint64_t hit =
						slot ? sw_slot_last_hit(slot)
						     : now;
					entry->mutable_time_since_last_hit()
						->set_elapsed_ns(
							(int64_t)(now - hit));
				}
			}
		}
		return Status::OK;
	}

	Status read_counters(const p4v1::CounterEntry &q,
			     std::vector<p4v1::Entity> *out)
	{
		if (q.counter_id() != 0 &&
		    !schema_.counters.count(q.counter_id()))
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown counter id " +
					     std::to_string(q.counter_id()));
		for (const auto &[id, counter] : schema_.counters) {
			if (q.counter_id() != 0 && q.counter_id() != id)
				continue;
			int64_t first = 0, last = counter.second - 1;
			if (q.has_index()) {
				if (q.index().index() < 0 ||
				    q.index().index() > last)
					return error(
						StatusCode::OUT_OF_RANGE,
						"counter index out of range");
				first = last = q.index().index();
			}
			for (int64_t i = first; i <= last; i++) {
				sw_packets_bytes v = sw_counter_read(
					&sw_->pipeline, sw_->worker_count,
					counter.first, (uint32_t)i);
				auto *c = out->emplace_back()
						  .mutable_counter_entry();
				c->set_counter_id(id);
				c->mutable_index()->set_index(i);
				c->mutable_data()->set_packet_count(
					(int64_t)v.packets);
				c->mutable_data()->set_byte_count(
					(int64_t)v.bytes);
			}
		}
		return Status::OK;
	}

	// -- a new pipeline: everything back to the program's defaults --

	void reset_state()
	{
		rte_rwlock_write_lock(&sw_->lock);
		sw_tables_reset(&sw_->pipeline);
		for (const auto &[id, counter] : schema_.counters)
			for (int64_t i = 0; i < counter.second; i++)
				sw_counter_write(&sw_->pipeline,
						 sw_->worker_count,
						 counter.first, (uint32_t)i,
						 sw_packets_bytes{0, 0});
		rte_rwlock_write_unlock(&sw_->lock);
		entries_.clear();
		defaults_.clear();
		members_.clear();
		groups_.clear();
		one_shot_entries_.clear();
		pre_.clear();
		meters_.clear();
		digest_config_.reset();
		pending_.clear();
		outstanding_.clear();
		recent_.clear();
	}

	sw_switch *sw_;
	Schema schema_;
	std::mutex mu_;
	std::optional<p4v1::ForwardingPipelineConfig> config_, saved_;
	std::map<std::string, RoleState> roles_;
	// The highest election id this device made primary (any role): the
	// fence of --fence-election-ids. Kept across streams and pipelines.
	std::optional<Uint128> fence_;
	std::map<uint32_t, std::map<std::string, StoredEntry>> entries_;
	std::map<uint32_t, StoredEntry> defaults_;
	std::map<uint32_t, Member> members_;
	std::map<uint32_t, Group> groups_;
	// Entries programmed one-shot, by their key: while any is held,
	// members and groups are refused, and the other way round.
	std::set<std::string> one_shot_entries_;
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

std::unique_ptr<grpc::Server> g_grpc;
std::unique_ptr<Server> g_service;

} // namespace

extern "C" bool sw_p4rt_start(sw_switch *sw, const char *address,
			      const struct jg_tls_options *tls, char *error,
			      unsigned long error_len)
{
	auto service = std::make_unique<Server>(sw);
	std::string why;
	if (!service->init(&why)) {
		std::snprintf(error, error_len, "%s", why.c_str());
		return false;
	}
	grpc::ServerBuilder builder;
	int bound_port = 0;
	std::string target(address);
	if (!jg_grpc_listen(builder, "jumbogate-switch", target, *tls,
			    &bound_port, &why)) {
		std::snprintf(error, error_len, "%s", why.c_str());
		return false;
	}
	builder.RegisterService(service.get());
	builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
	auto server = builder.BuildAndStart();
	if (server == nullptr || (jg_grpc_is_tcp(target) && bound_port == 0)) {
		std::snprintf(error, error_len,
			      "cannot serve P4Runtime on %s (in use, or not a "
			      "HOST:PORT / unix:PATH address)",
			      address);
		return false;
	}
	service->start_control_loop();
	g_server = service.get();
	g_service = std::move(service);
	g_grpc = std::move(server);
	return true;
}

extern "C" uint64_t sw_p4rt_stream_messages_dropped(void)
{
	return g_stream_messages_dropped.load();
}

extern "C" uint64_t sw_p4rt_digests_dropped(void)
{
	return g_digests_dropped.load();
}

extern "C" uint64_t sw_p4rt_streams_open(void)
{
	return g_open_streams.load();
}

extern "C" uint64_t sw_p4rt_streams_refused(void)
{
	return g_streams_refused.load();
}

extern "C" void sw_p4rt_writes_telemetry(struct rte_tel_data *d)
{
	g_writes.telemetry(d);
}

extern "C" void sw_p4rt_stop(void)
{
	if (g_grpc) {
		g_grpc->Shutdown(std::chrono::system_clock::now() +
				 std::chrono::seconds(2));
		g_grpc.reset();
	}
	if (g_service) {
		g_service->stop_control_loop();
		g_service.reset();
	}
	g_server = nullptr;
}
