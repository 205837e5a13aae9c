// SPDX-License-Identifier: Apache-2.0
//
// nic.proto on top of the C control layer. This file only translates
// between protobuf messages and control.h: validation, state and the
// hand-over to the workers all live in control.c, so the data path stays
// plain C and the C++ here never touches an engine.
#include "grpc_server.h"

#include <algorithm>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "control.h"
#include "grpc_listen.h"
#include "jumbogate/v1/nic.grpc.pb.h"
#include "scaling.h"

namespace
{

namespace v1 = jumbogate::v1;

grpc::Status to_status(const nic_result &result)
{
	if (result.status == NIC_STATUS_OK)
		return grpc::Status::OK;
	return grpc::Status(static_cast<grpc::StatusCode>(result.status),
			    result.message);
}

// The control layer takes strings as C strings, which end at their first
// NUL: "198.51.100.0/24\0junk" would pass as its first part. A string field
// with a NUL in it is refused whole, before anything is called.
struct StringField {
	std::string name;
	const std::string &value;
};

grpc::Status refuse_nul(std::initializer_list<StringField> fields)
{
	for (const StringField &field : fields)
		if (field.value.find('\0') != std::string::npos)
			return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
					    field.name +
						    " contains a NUL byte");
	return grpc::Status::OK;
}

void fill_config(const nic_config_view &view, v1::NicConfig *config)
{
	config->set_internal_mtu(view.internal_mtu);
	config->set_max_flows(view.max_flows);
	config->set_max_segments(view.max_segments);
	config->mutable_delay()->set_rate_threshold_bps(
		view.rate_threshold_bps);
	config->mutable_delay()->set_yield_threshold(view.yield_threshold);
	config->mutable_delay()->set_quantile(view.quantile);
	config->mutable_delay()->set_max_delay_us(view.max_delay_us);
	config->set_default_path_mtu_v4(view.default_path_mtu_v4);
	config->set_default_path_mtu_v6(view.default_path_mtu_v6);
	config->set_merge_unknown_flows(view.merge_unknown_flows);
	for (unsigned int i = 0; i < view.internal_prefix_count; i++)
		config->add_internal_prefixes()->set_cidr(
			view.internal_prefixes[i]);
}

// Fencing of deposed leaders (docs/fleet.md). A controller elected through
// the fleet's store sends its election id with every change, in the
// jumbogate-election-id metadata as "HIGH:LOW" (the fleet's fencing epoch
// and the store revision at which it won, as its P4Runtime election id).
// The SmartNIC keeps the highest id a change carried and refuses a change
// with a lower one, or with none once an id was seen: a leader that was
// paused or cut off past its lease cannot change the SmartNIC after its
// successor did, even before it learns that it lost. Reads are never
// fenced. A change raises the fence only once the request was found valid
// (any answer but INVALID_ARGUMENT): as a P4Runtime switch takes a
// controller's election id from its arbitration, not from a write it
// refuses, a malformed request from a successor must not lock out a
// leader that still has the lease. While a change is in flight its id
// fences as if it were valid, so that no change with a lower id is
// admitted behind it and lands after it. The highest id lives in memory:
// after a restart of the SmartNIC the next change sets it again.
class LeaderFence
{
      public:
	using ElectionId = std::pair<uint64_t, uint64_t>;

	// The id a change carried, in flight from admit() to settle().
	struct Claim {
		bool carried = false;
		ElectionId id{0, 0};
	};

	// Whether the change may go ahead; the fence itself rises only at
	// settle().
	grpc::Status admit(const grpc::ServerContext *context, Claim *claim)
	{
		const auto &metadata = context->client_metadata();
		auto found = metadata.find(kMetadataKey);
		std::lock_guard<std::mutex> lock(mu_);
		ElectionId bar;
		bool fenced = lowest_admitted(&bar);

		if (found == metadata.end()) {
			if (!fenced)
				return grpc::Status::OK;
			refused_++;
			return grpc::Status(
				grpc::StatusCode::PERMISSION_DENIED,
				"fenced: a leader with election id " +
					show(bar) +
					" changes this SmartNIC; a change must "
					"carry jumbogate-election-id");
		}
		ElectionId id;
		if (!parse(std::string(found->second.data(),
				       found->second.size()),
			   &id)) {
			refused_++;
			return grpc::Status(
				grpc::StatusCode::INVALID_ARGUMENT,
				"jumbogate-election-id must be HIGH:LOW, two "
				"unsigned 64-bit numbers");
		}
		if (fenced && id < bar) {
			refused_++;
			return grpc::Status(
				grpc::StatusCode::PERMISSION_DENIED,
				"fenced: election id " + show(id) +
					" is below " + show(bar) +
					", whose leader changed this SmartNIC "
					"since");
		}
		claim->carried = true;
		claim->id = id;
		in_flight_[id]++;
		return grpc::Status::OK;
	}

	// After the change: a request that passed validation raises the
	// fence to the id it carried (never lowers it: changes of two
	// leaders may overlap); one refused as invalid leaves it as it was.
	void settle(const Claim &claim, const grpc::Status &outcome)
	{
		if (!claim.carried)
			return;
		std::lock_guard<std::mutex> lock(mu_);
		if (--in_flight_[claim.id] == 0)
			in_flight_.erase(claim.id);
		if (outcome.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
			return;
		if (!seen_ || highest_ < claim.id)
			highest_ = claim.id;
		seen_ = true;
	}

	void fill(v1::Fence *out)
	{
		std::lock_guard<std::mutex> lock(mu_);
		out->set_election_id_high(highest_.first);
		out->set_election_id_low(highest_.second);
		out->set_changes_refused(refused_);
	}

      private:
	static constexpr const char *kMetadataKey = "jumbogate-election-id";

	// The lowest id a change may carry now (false: any change goes,
	// no id was seen): the highest of a valid change or of one in
	// flight. Called with mu_ held.
	bool lowest_admitted(ElectionId *bar) const
	{
		*bar = highest_;
		if (!in_flight_.empty() &&
		    (!seen_ || *bar < in_flight_.rbegin()->first))
			*bar = in_flight_.rbegin()->first;
		return seen_ || !in_flight_.empty();
	}

	static std::string show(const ElectionId &id)
	{
		return std::to_string(id.first) + ":" +
		       std::to_string(id.second);
	}

	static bool parse_u64(const std::string &text, uint64_t *out)
	{
		if (text.empty() || text.size() > 20 ||
		    text.find_first_not_of("0123456789") != std::string::npos)
			return false;
		errno = 0;
		unsigned long long value =
			std::strtoull(text.c_str(), nullptr, 10);
		if (errno == ERANGE)
			return false;
		*out = value;
		return true;
	}

	static bool parse(const std::string &text, ElectionId *id)
	{
		size_t colon = text.find(':');
		return colon != std::string::npos &&
		       parse_u64(text.substr(0, colon), &id->first) &&
		       parse_u64(text.substr(colon + 1), &id->second);
	}

	std::mutex mu_;
	bool seen_ = false;
	ElectionId highest_{0, 0};
	// Ids of the changes admitted and not yet settled, with their count.
	std::map<ElectionId, unsigned int> in_flight_;
	uint64_t refused_ = 0;
};

class NicService final : public v1::Nic::Service
{
      public:
	grpc::Status GetInfo(grpc::ServerContext *, const v1::GetInfoRequest *,
			     v1::NicInfo *reply) override
	{
		nic_info_view info;

		nic_control_info(&info);
		reply->set_boot_id(info.boot_id);
		reply->set_version(JUMBOGATE_NIC_VERSION);
		reply->set_uptime_s(info.uptime_s);
		reply->set_workers(info.workers);
		for (unsigned int p = 0; p < info.port_count; p++)
			reply->add_ports(info.ports[p]);
		return grpc::Status::OK;
	}

	grpc::Status GetConfig(grpc::ServerContext *,
			       const v1::GetConfigRequest *,
			       v1::NicConfig *reply) override
	{
		nic_config_view view{};

		nic_control_get_config(&view);
		fill_config(view, reply);
		return grpc::Status::OK;
	}

	grpc::Status Configure(grpc::ServerContext *context,
			       const v1::NicConfig *request,
			       v1::NicConfig *reply) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			nic_config_request req{};
			nic_config_view view{};

			for (int i = 0; i < request->internal_prefixes_size();
			     i++)
				if (grpc::Status bad = refuse_nul(
					    {{"internal_prefixes[" +
						      std::to_string(i) +
						      "].cidr",
					      request->internal_prefixes(i)
						      .cidr()}});
				    !bad.ok())
					return bad;
			req.values.internal_mtu = request->internal_mtu();
			req.values.max_flows = request->max_flows();
			req.values.max_segments = request->max_segments();
			req.values.rate_threshold_bps =
				request->delay().rate_threshold_bps();
			req.values.yield_threshold =
				request->delay().yield_threshold();
			req.values.quantile = request->delay().quantile();
			req.values.max_delay_us =
				request->delay().max_delay_us();
			req.values.default_path_mtu_v4 =
				request->default_path_mtu_v4();
			req.values.default_path_mtu_v6 =
				request->default_path_mtu_v6();
			req.values.merge_unknown_flows =
				request->merge_unknown_flows();
			req.set_merge_unknown_flows =
				request->set_merge_unknown_flows();
			req.set_internal_prefixes =
				request->set_internal_prefixes();
			/* One past the limit says "too many" (refused by
			 * control). */
			req.internal_prefix_count = (unsigned int)std::min(
				request->internal_prefixes_size(),
				NIC_MAX_INTERNAL_PREFIXES + 1);
			for (unsigned int i = 0;
			     i < req.internal_prefix_count &&
			     i < NIC_MAX_INTERNAL_PREFIXES;
			     i++)
				req.internal_prefixes[i] =
					request->internal_prefixes((int)i)
						.cidr()
						.c_str();
			grpc::Status status =
				to_status(nic_control_configure(&req, &view));
			if (status.ok())
				fill_config(view, reply);
			return status;
		});
	}

	grpc::Status SetPathMtu(grpc::ServerContext *context,
				const v1::SetPathMtuRequest *request,
				v1::SetPathMtuResponse *) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			if (grpc::Status bad =
				    refuse_nul({{"prefix.cidr",
						 request->prefix().cidr()}});
			    !bad.ok())
				return bad;
			return to_status(nic_control_set_path_mtu(
				request->prefix().cidr().c_str(),
				request->mtu()));
		});
	}

	grpc::Status DeletePathMtu(grpc::ServerContext *context,
				   const v1::DeletePathMtuRequest *request,
				   v1::DeletePathMtuResponse *) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			if (grpc::Status bad =
				    refuse_nul({{"prefix.cidr",
						 request->prefix().cidr()}});
			    !bad.ok())
				return bad;
			return to_status(nic_control_delete_path_mtu(
				request->prefix().cidr().c_str()));
		});
	}

	grpc::Status ListPathMtus(grpc::ServerContext *,
				  const v1::ListPathMtusRequest *,
				  v1::ListPathMtusResponse *reply) override
	{
		size_t count = 0;
		std::unique_ptr<nic_path_mtu_entry, decltype(&std::free)>
			entries(nic_control_list_path_mtus(&count), &std::free);

		for (size_t i = 0; i < count; i++) {
			v1::PathMtu *entry = reply->add_entries();
			entry->mutable_prefix()->set_cidr(
				entries.get()[i].cidr);
			entry->set_mtu(entries.get()[i].mtu);
		}
		return grpc::Status::OK;
	}

	grpc::Status OnloadFlow(grpc::ServerContext *context,
				const v1::NicFlowRequest *request,
				v1::NicFlowResponse *) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			const v1::FiveTuple &flow = request->flow();

			if (grpc::Status bad = refuse_nul(
				    {{"flow.src_ip", flow.src_ip()},
				     {"flow.dst_ip", flow.dst_ip()}});
			    !bad.ok())
				return bad;
			return to_status(nic_control_onload(
				flow.src_ip().c_str(), flow.dst_ip().c_str(),
				flow.protocol(), flow.src_port(),
				flow.dst_port()));
		});
	}

	grpc::Status OffloadFlow(grpc::ServerContext *context,
				 const v1::NicFlowRequest *request,
				 v1::NicFlowResponse *reply) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			const v1::FiveTuple &flow = request->flow();
			uint64_t flushed = 0;

			if (grpc::Status bad = refuse_nul(
				    {{"flow.src_ip", flow.src_ip()},
				     {"flow.dst_ip", flow.dst_ip()}});
			    !bad.ok())
				return bad;
			grpc::Status status = to_status(nic_control_offload(
				flow.src_ip().c_str(), flow.dst_ip().c_str(),
				flow.protocol(), flow.src_port(),
				flow.dst_port(), &flushed));

			reply->set_flushed_packets(flushed);
			return status;
		});
	}

	grpc::Status ListFlows(grpc::ServerContext *,
			       const v1::ListNicFlowsRequest *,
			       v1::ListNicFlowsResponse *reply) override
	{
		size_t count = 0;
		nic_result result;
		std::unique_ptr<nic_flow_entry, decltype(&std::free)> entries(
			nic_control_list_flows(&count, &result), &std::free);

		for (size_t i = 0; i < count; i++) {
			const nic_flow_entry &entry = entries.get()[i];
			v1::NicFlow *flow = reply->add_flows();

			flow->mutable_flow()->set_src_ip(entry.src_ip);
			flow->mutable_flow()->set_dst_ip(entry.dst_ip);
			flow->mutable_flow()->set_protocol(entry.protocol);
			flow->mutable_flow()->set_src_port(entry.src_port);
			flow->mutable_flow()->set_dst_port(entry.dst_port);
			flow->set_packets_in(entry.packets_in);
			flow->set_merged_packets(entry.merged_packets);
		}
		return to_status(result);
	}

	grpc::Status GetStats(grpc::ServerContext *,
			      const v1::GetNicStatsRequest *,
			      v1::NicStats *reply) override
	{
		fence_.fill(reply->mutable_fence());
		nic_totals totals;
		grpc::Status status = to_status(nic_control_stats(&totals));
		const jg_stats &engine = totals.engine;
		const char *reason;

		if (!status.ok())
			return status;
		reply->set_packets_in(totals.counters.rx_packets);
		reply->set_bytes_in(totals.counters.rx_bytes);
		reply->set_packets_out(totals.counters.tx_packets);
		reply->set_bytes_out(totals.counters.tx_bytes);
		reply->set_packets_held(totals.held);
		reply->set_merged_packets(engine.merge.merged_packets);
		reply->set_segments_merged(totals.segments_merged);
		reply->set_conversion_yield(totals.conversion_yield);
		reply->set_tcp_payload_bytes_in(engine.merge.tcp_payload_in);
		reply->set_tcp_payload_bytes_full(
			engine.merge.tcp_payload_full);
		reply->set_split_packets(engine.split.packets_segmented);
		reply->set_split_segments_out(engine.split.segments_out);
		reply->set_caravans_packed(engine.caravan.caravans_packed);
		reply->set_caravans_unpacked(engine.caravan.caravans_unpacked);
		for (unsigned int i = 0; (reason = nic_drop_reason_name(i));
		     i++) {
			v1::DropCount *drop = reply->add_drops();
			drop->set_reason(reason);
			drop->set_packets(nic_drop_count(&totals, i));
		}
		for (unsigned int b = 0; b < JG_DELAY_HISTOGRAM_BUCKETS; b++) {
			v1::HistogramBucket *bucket = reply->add_merge_delay();
			bucket->set_le_us(nic_delay_bucket_upper_us(b));
			bucket->set_count(engine.merge.delay_histogram_us[b]);
		}
		nic_scaling_view view;
		nic_scaling_read(&view);
		reply->set_queues(view.queues);
		reply->set_serving_workers(view.serving);
		reply->set_queue_handovers(view.handovers);
		reply->set_flows_active(engine.flows_now);
		reply->set_flows_evicted(engine.merge.flows_evicted);
		reply->set_onloads_refused(engine.merge.onloads_refused);
		reply->set_pins_expired(engine.merge.pins_expired);
		reply->set_merge_delay_sum_s((double)engine.merge.delay_sum_ns /
					     1e9);
		nic_control_pmtu_counters(
			[](void *context, const char *name, uint64_t value) {
				(*static_cast<v1::NicStats *>(context)
					  ->mutable_path_mtu_discovery())
					[name] = value;
			},
			reply);
		return grpc::Status::OK;
	}

	static void fill_path(const nic_learned_path &from, v1::LearnedPath *to)
	{
		to->set_address(from.address);
		to->set_mtu(from.mtu);
		to->set_method(from.method);
		to->set_exact(from.exact);
		to->set_probing(from.probing);
		to->set_age_s(from.age_s);
		to->set_rtt_ms(from.rtt_ms);
	}

	grpc::Status
	ListLearnedPaths(grpc::ServerContext *,
			 const v1::ListLearnedPathsRequest *,
			 v1::ListLearnedPathsResponse *reply) override
	{
		size_t count = 0;
		bool enabled = false;
		std::unique_ptr<nic_learned_path, decltype(&std::free)> paths(
			nic_control_learned_paths(&count, &enabled),
			&std::free);

		reply->set_enabled(enabled);
		for (size_t i = 0; i < count; i++)
			fill_path(paths.get()[i], reply->add_paths());
		return grpc::Status::OK;
	}

	grpc::Status ProbePath(grpc::ServerContext *context,
			       const v1::ProbePathRequest *request,
			       v1::LearnedPath *reply) override
	{
		return fenced_change(context, [&]() -> grpc::Status {
			if (grpc::Status bad = refuse_nul(
				    {{"address", request->address()}});
			    !bad.ok())
				return bad;
			nic_learned_path path;
			nic_result result = nic_control_probe_path(
				request->address().c_str(), request->exact(),
				&path);

			if (result.status == NIC_STATUS_OK)
				fill_path(path, reply);
			return to_status(result);
		});
	}

      private:
	// A change between the fence's check and its settling, which the
	// change's outcome decides.
	template <typename Change>
	grpc::Status fenced_change(const grpc::ServerContext *context,
				   Change change)
	{
		LeaderFence::Claim claim;

		if (grpc::Status fenced = fence_.admit(context, &claim);
		    !fenced.ok())
			return fenced;
		// Settled however the change ends: a change that throws
		// (std::bad_alloc; gRPC answers it UNKNOWN) would otherwise
		// stay in flight for good and fence every lower id. It was
		// valid and failed inside, so the fence rises as for any
		// other failure but INVALID_ARGUMENT.
		struct Settle {
			LeaderFence &fence;
			const LeaderFence::Claim &claim;
			grpc::Status outcome{grpc::StatusCode::INTERNAL,
					     "the change threw"};
			~Settle()
			{
				fence.settle(claim, outcome);
			}
		} settle{fence_, claim};
		settle.outcome = change();
		return settle.outcome;
	}

	LeaderFence fence_;
};

NicService service;
std::unique_ptr<grpc::Server> server;

} // namespace

extern "C" bool nic_grpc_start(const char *address,
			       const struct jg_tls_options *tls, char *error,
			       size_t error_len)
{
	grpc::ServerBuilder builder;
	int selected_port = 0;
	std::string why;

	if (!jg_grpc_listen(builder, "jumbogate-nic", address, *tls,
			    &selected_port, &why)) {
		snprintf(error, error_len, "%s", why.c_str());
		return false;
	}
	builder.RegisterService(&service);
	server = builder.BuildAndStart();
	if (!server || (jg_grpc_is_tcp(address) && selected_port == 0)) {
		snprintf(error, error_len,
			 "cannot serve gRPC on %s (address in use or not "
			 "allowed)",
			 address);
		server.reset();
		return false;
	}
	return true;
}

extern "C" void nic_grpc_stop(void)
{
	if (!server)
		return;
	// Calls in flight get a moment to finish; the workers still run.
	server->Shutdown(std::chrono::system_clock::now() +
			 std::chrono::seconds(3));
	server->Wait();
	server.reset();
}
