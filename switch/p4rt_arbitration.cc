// SPDX-License-Identifier: Apache-2.0
// The P4Runtime server's checks of who may do what, and arbitration:
// primaries by role and election id, and the streams of the clients.
#include "p4rt_server.h"

namespace p4rt_server
{

Status
Server::StreamChannel(grpc::ServerContext *context,
		      grpc::ServerReaderWriter<p4v1::StreamMessageResponse,
					       p4v1::StreamMessageRequest> *rw)
{
	Stream stream;
	stream.rw = rw;
	Status admitted = take_slot(context, &stream);
	if (!admitted.ok())
		return admitted;
	stream.start();
	p4v1::StreamMessageRequest request;
	Status result = Status::OK;
	while (!context->IsCancelled() && rw->Read(&request)) {
		switch (request.update_case()) {
		case p4v1::StreamMessageRequest::kArbitration:
			result = arbitrate(&stream, request.arbitration());
			if (result.ok())
				arbitrated(&stream);
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
	release_slot(&stream);
	return result;
}

// Each stream holds a thread of the server from its first message,
// arbitrated or not. One that has not arbitrated waits among
// unarbitrated_ for at most kArbitrationDeadlineNs; past
// kMaxUnarbitratedStreams waiting, or kMaxStreams open while any waits,
// the oldest that waits is closed to make room. Past kMaxStreams open and
// arbitrated, the newest is refused at once.
Status Server::take_slot(grpc::ServerContext *context, Stream *stream)
{
	std::lock_guard<std::mutex> lock(streams_mu_);
	if (!unarbitrated_.empty() &&
	    (unarbitrated_.size() >= p4rt_bounds::kMaxUnarbitratedStreams ||
	     g_open_streams >= p4rt_bounds::kMaxStreams))
		close_unarbitrated(unarbitrated_.front());
	if (g_open_streams >= p4rt_bounds::kMaxStreams) {
		g_streams_refused++;
		return error(StatusCode::RESOURCE_EXHAUSTED,
			     std::to_string(p4rt_bounds::kMaxStreams) +
				     " streams are open, the most "
				     "this switch takes");
	}
	g_open_streams++;
	stream->holds_slot = true;
	stream->context = context;
	stream->opened_ns = sw_now_ns();
	stream->waiting_at = unarbitrated_.insert(unarbitrated_.end(), stream);
	stream->waits_arbitration = true;
	g_unarbitrated_streams++;
	return Status::OK;
}

// The stream has arbitrated: it no longer waits, nor has a deadline.
void Server::arbitrated(Stream *stream)
{
	std::lock_guard<std::mutex> lock(streams_mu_);
	if (!stream->waits_arbitration)
		return;
	unarbitrated_.erase(stream->waiting_at);
	stream->waits_arbitration = false;
	g_unarbitrated_streams--;
}

// The stream ends: its slot is free (unless it was closed to make room,
// which freed it then).
void Server::release_slot(Stream *stream)
{
	std::lock_guard<std::mutex> lock(streams_mu_);
	free_slot(stream);
}

// Caller holds streams_mu_. The stream leaves the streams waiting for
// arbitration, if it was one, and gives up its slot, if it held one.
void Server::free_slot(Stream *stream)
{
	if (stream->waits_arbitration) {
		unarbitrated_.erase(stream->waiting_at);
		stream->waits_arbitration = false;
		g_unarbitrated_streams--;
	}
	if (stream->holds_slot) {
		stream->holds_slot = false;
		g_open_streams--;
	}
}

// Caller holds streams_mu_. Closes a stream that has not arbitrated: its
// call is cancelled (the client sees CANCELLED; its Read in StreamChannel
// ends) and its slot is free at once.
void Server::close_unarbitrated(Stream *stream)
{
	free_slot(stream);
	g_unarbitrated_streams_closed++;
	stream->context->TryCancel();
}

// From the control loop: streams that have not arbitrated within
// kArbitrationDeadlineNs are closed. (The clock is read under the lock,
// so never before a stream's opened_ns.)
void Server::close_late_streams()
{
	std::lock_guard<std::mutex> lock(streams_mu_);
	uint64_t now = sw_now_ns();
	while (!unarbitrated_.empty() &&
	       now - unarbitrated_.front()->opened_ns >=
		       p4rt_bounds::kArbitrationDeadlineNs)
		close_unarbitrated(unarbitrated_.front());
}

Status Server::check_device(uint64_t device_id) const
{
	if (device_id != sw_->device_id)
		return error(StatusCode::NOT_FOUND,
			     "no device " + std::to_string(device_id) +
				     " (this switch is device " +
				     std::to_string(sw_->device_id) + ")");
	return Status::OK;
}

Status Server::no_pipeline()
{
	return error(StatusCode::FAILED_PRECONDITION,
		     "No forwarding pipeline config set for this "
		     "device");
}

// Caller holds mu_.
Status Server::check_primary(const std::string &role, bool has_election,
			     const Uint128 &election)
{
	if (has_election && below_fence(role, election))
		return error(StatusCode::PERMISSION_DENIED,
			     "election id " + election.text() + " is below " +
				     fence_->text() +
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

// Who may change the device, in the order P4Runtime 12.2 checks it: the
// device, the role, then the primary (a backup is PERMISSION_DENIED even
// before any pipeline config). Write and SetForwardingPipelineConfig.
// Caller holds mu_.
template <typename Request> Status Server::check_writer(const Request &request)
{
	Status status = check_device(request.device_id());
	if (status.ok())
		status = check_role(request.role(), StatusCode::NOT_FOUND);
	if (status.ok())
		status =
			check_primary(request.role(), request.has_election_id(),
				      from_proto(request.election_id()));
	return status;
}
template Status Server::check_writer(const p4v1::WriteRequest &request);
template Status
Server::check_writer(const p4v1::SetForwardingPipelineConfigRequest &request);

// What a reader needs: this device, with a pipeline. Caller holds mu_.
Status Server::check_readable(uint64_t device_id) const
{
	Status status = check_device(device_id);
	if (status.ok() && !config_)
		return no_pipeline();
	return status;
}

Status Server::arbitrate(Stream *stream,
			 const p4v1::MasterArbitrationUpdate &update)
{
	std::lock_guard<std::mutex> lock(mu_);
	// A stream arbitrated for this device that names another is
	// FAILED_PRECONDITION (a stream's device cannot change); a new
	// stream naming an unknown device is NOT_FOUND.
	if (update.device_id() != sw_->device_id)
		return error(stream->arbitrated
				     ? StatusCode::FAILED_PRECONDITION
				     : StatusCode::NOT_FOUND,
			     "arbitration for device " +
				     std::to_string(update.device_id()) +
				     ", this switch is device " +
				     std::to_string(sw_->device_id));
	std::string role = update.role().name();
	if (stream->arbitrated && role != stream->role)
		return error(StatusCode::FAILED_PRECONDITION,
			     "a stream cannot change its role");
	// A config outside the scheme agreed with the device (named
	// roles carry a stratum.P4RoleConfig, the default role none) is
	// INVALID_ARGUMENT, as the specification's arbitration rules say.
	// (PERMISSION_DENIED is for a known client that may not do
	// something, e.g. a backup's write.)
	std::optional<RoleConfig> config;
	Status status =
		parse_role_config(role, update.role(), schema_, &config);
	if (!status.ok())
		return status;
	auto found = roles_.find(role);
	if (!stream->arbitrated && found != roles_.end() &&
	    found->second.streams.size() >= p4rt_bounds::kMaxStreamsPerRole)
		return error(
			StatusCode::RESOURCE_EXHAUSTED,
			"this role has " +
				std::to_string(found->second.streams.size()) +
				" streams already, the most this "
				"switch takes");
	bool has_election = update.has_election_id();
	Uint128 election = from_proto(update.election_id());
	if (has_election && found != roles_.end())
		for (Stream *other : found->second.streams)
			if (other != stream && other->has_election &&
			    other->election == election)
				return error(StatusCode::INVALID_ARGUMENT,
					     "election id already used by "
					     "another client of this role");
	bool changed = false;
	status = admit_config(role, config, stream, has_election, election,
			      &changed);
	if (!status.ok())
		return status;
	auto &state = roles_[role];
	if (changed)
		state.config = std::move(config);
	count_roles();
	if (!stream->arbitrated) {
		state.streams.push_back(stream);
		stream->arbitrated = true;
		stream->role = role;
	}
	stream->has_election = has_election;
	stream->election = election;
	// A new config is every stream's news (the specification's
	// "Client Arbitration Notifications").
	elect(role, stream, changed);
	return Status::OK;
}

// With --fence-election-ids, an id of the default role below the highest
// this device ever made its primary: a deposed leader, which may read and
// be a backup but never be primary or write again, even once the stream
// of the id that deposed it has gone. Named roles are not fenced: their
// election ids are their own (P4Runtime compares ids within a role), and
// one role's high id must not lock another's controller out.
bool Server::below_fence(const std::string &role, const Uint128 &election) const
{
	return role.empty() && sw_->fence_election_ids && fence_ &&
	       election < *fence_;
}

// Recomputes the primary of a role and tells who needs to know: every
// stream when the primary changed or `tell_all`, else only `asking`.
void Server::elect(const std::string &role, Stream *asking, bool tell_all)
{
	auto &state = roles_[role];
	Stream *best = nullptr;
	for (Stream *s : state.streams)
		if (s->has_election && !below_fence(role, s->election) &&
		    (best == nullptr || best->election < s->election))
			best = s;
	bool changed = tell_all || best != state.primary;
	state.primary = best;
	if (best != nullptr && role.empty() &&
	    (!fence_ || *fence_ < best->election))
		fence_ = best->election;
	for (Stream *s : state.streams)
		if (changed || s == asking)
			send_arbitration(s, state);
}

void Server::send_arbitration(Stream *stream, const RoleState &state)
{
	p4v1::StreamMessageResponse message;
	auto *update = message.mutable_arbitration();
	update->set_device_id(sw_->device_id);
	update->mutable_role()->set_name(stream->role);
	if (state.config)
		update->mutable_role()->mutable_config()->PackFrom(
			state.config->canonical);
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
		update->mutable_status()->set_code(google::rpc::ALREADY_EXISTS);
		update->mutable_status()->set_message(
			"is backup: another client is primary");
	} else if (stream->has_election &&
		   below_fence(stream->role, stream->election)) {
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
		update->mutable_status()->set_code(google::rpc::NOT_FOUND);
		update->mutable_status()->set_message("no primary client");
	}
	stream->send(message);
}

void Server::leave(Stream *stream)
{
	std::lock_guard<std::mutex> lock(mu_);
	if (!stream->arbitrated)
		return;
	auto &state = roles_[stream->role];
	state.streams.remove(stream);
	if (state.streams.empty()) {
		roles_.erase(stream->role);
		count_roles();
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

void Server::stream_error(Stream *stream, StatusCode code,
			  const std::string &message,
			  const p4v1::PacketOut *packet,
			  const p4v1::DigestListAck *ack)
{
	p4v1::StreamMessageResponse response;
	auto *e = response.mutable_error();
	e->set_canonical_code(code);
	e->set_message(message);
	e->set_space("p4.v1");
	if (packet != nullptr)
		*e->mutable_packet_out()->mutable_packet_out() = *packet;
	if (ack != nullptr)
		*e->mutable_digest_list_ack()->mutable_digest_list_ack() = *ack;
	stream->send(response);
}

// Caller holds mu_.
Stream *Server::primary_of(const std::string &role)
{
	auto found = roles_.find(role);
	return found == roles_.end() ? nullptr : found->second.primary;
}

} // namespace p4rt_server
