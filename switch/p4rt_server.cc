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
//
// The server's parts are in p4rt_*.cc; p4rt_server.h says which is where.
#include "p4rt_server.h"

#include "grpc_listen.h"

namespace p4rt_server
{

std::atomic<uint64_t> g_stream_messages_dropped{0};
std::atomic<uint64_t> g_digests_dropped{0};
std::atomic<size_t> g_open_streams{0};
std::atomic<uint64_t> g_streams_refused{0};
std::atomic<uint64_t> g_stream_outbox_bytes{0};
std::atomic<size_t> g_unarbitrated_streams{0};
std::atomic<uint64_t> g_unarbitrated_streams_closed{0};
std::atomic<uint64_t> g_reads_refused{0};
std::atomic<uint64_t> g_packet_outs_refused{0};
p4rt_writes::WriteRecord g_writes;

bool Server::init(std::string *why)
{
	const char *text = sw_builtin_p4info(sw_->parse_depth);
	if (text == nullptr) {
		*why = "no built-in P4Info for a parse depth of " +
		       std::to_string(sw_->parse_depth);
		return false;
	}
	return build_schema(text, &schema_, why);
}

void Server::start_control_loop()
{
	control_thread_ = std::thread([this] { control_loop(); });
}

void Server::stop_control_loop()
{
	stopping_ = true;
	if (control_thread_.joinable())
		control_thread_.join();
}

Status Server::Capabilities(grpc::ServerContext *,
			    const p4v1::CapabilitiesRequest *,
			    p4v1::CapabilitiesResponse *reply)
{
	reply->set_p4runtime_api_version(kApiVersion);
	return Status::OK;
}

Status Server::SetForwardingPipelineConfig(
	grpc::ServerContext *,
	const p4v1::SetForwardingPipelineConfigRequest *request,
	p4v1::SetForwardingPipelineConfigResponse *)
{
	std::lock_guard<std::mutex> lock(mu_);
	Status status = check_writer(*request);
	if (status.ok())
		status = check_pipeline_push(request->role());
	if (!status.ok())
		return status;
	using Req = p4v1::SetForwardingPipelineConfigRequest;
	auto action = request->action();
	if (action == Req::COMMIT) {
		// The codes are the specification's: NOT_FOUND for nothing
		// saved, INVALID_ARGUMENT for a config given with COMMIT.
		if (request->has_config())
			return error(StatusCode::INVALID_ARGUMENT,
				     "COMMIT takes no config: it realizes "
				     "the one VERIFY_AND_SAVE saved");
		if (!saved_)
			return error(StatusCode::NOT_FOUND,
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
	std::string diff =
		compare_p4info(schema_.p4info, request->config().p4info());
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
		return error(StatusCode::INVALID_ARGUMENT, "unknown action");
	}
}

Status Server::GetForwardingPipelineConfig(
	grpc::ServerContext *,
	const p4v1::GetForwardingPipelineConfigRequest *request,
	p4v1::GetForwardingPipelineConfigResponse *reply)
{
	std::lock_guard<std::mutex> lock(mu_);
	Status status = check_device(request->device_id());
	if (!status.ok())
		return status;
	// Before any pipeline the answer is OK with no config at all
	// ("GetForwardingPipelineConfig RPC"), not an error: a client asks
	// this to learn whether it must push one.
	if (!config_)
		return Status::OK;
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

void Server::reset_state()
{
	rte_rwlock_write_lock(&sw_->lock);
	sw_tables_reset(&sw_->pipeline);
	for (const auto &[id, counter] : schema_.counters)
		for (int64_t i = 0; i < counter.second; i++)
			sw_counter_write(&sw_->pipeline, sw_->worker_count,
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
	forget_digests();
}

} // namespace p4rt_server

using p4rt_server::g_digests_dropped;
using p4rt_server::g_open_streams;
using p4rt_server::g_reads_refused;
using p4rt_server::g_stream_messages_dropped;
using p4rt_server::g_stream_outbox_bytes;
using p4rt_server::g_streams_refused;
using p4rt_server::g_unarbitrated_streams;
using p4rt_server::g_unarbitrated_streams_closed;
using p4rt_server::g_writes;
using p4rt_server::Server;

namespace
{
Server *g_server = nullptr;
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

extern "C" uint64_t sw_p4rt_stream_outbox_bytes(void)
{
	return g_stream_outbox_bytes.load();
}

extern "C" uint64_t sw_p4rt_streams_unarbitrated(void)
{
	return g_unarbitrated_streams.load();
}

extern "C" uint64_t sw_p4rt_streams_unarbitrated_closed(void)
{
	return g_unarbitrated_streams_closed.load();
}

extern "C" uint64_t sw_p4rt_reads_refused(void)
{
	return g_reads_refused.load();
}

extern "C" uint64_t sw_p4rt_packet_outs_refused(void)
{
	return p4rt_server::g_packet_outs_refused.load();
}

extern "C" uint64_t sw_p4rt_multicast_groups_refused(void)
{
	return p4rt_pre::g_multicast_groups_refused.load();
}

extern "C" uint64_t sw_p4rt_clone_sessions_refused(void)
{
	return p4rt_pre::g_clone_sessions_refused.load();
}

extern "C" uint64_t sw_p4rt_replicas_refused(void)
{
	return p4rt_pre::g_replicas_refused.load();
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
