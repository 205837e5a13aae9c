// SPDX-License-Identifier: Apache-2.0
// Named roles (p4rt_roles.h): their configs, and the checks of what a
// role's primary may do. Arbitration itself (one primary per role) is in
// p4rt_arbitration.cc.
#include "p4rt_server.h"

namespace p4rt_server
{

std::atomic<uint64_t> g_roles_refused{0};
std::atomic<uint64_t> g_role_denials{0};
std::atomic<uint64_t> g_named_roles{0};

namespace
{

// A bit string's canonical form (P4Runtime "Bytestrings"): no leading
// zero bytes, and zero as one byte.
std::string canonical_bytes(const std::string &value)
{
	size_t first = value.find_first_not_of('\0');
	if (first == std::string::npos)
		return std::string(1, '\0');
	return value.substr(first);
}

// The ids a role may name: everything a Write addresses by P4 id. Actions
// are written only inside a table entry or member, so a role names the
// table or the action profile.
std::set<uint32_t> writable_ids(const p4cfg::P4Info &info)
{
	std::set<uint32_t> ids;
	for (const auto &t : info.tables())
		ids.insert(t.preamble().id());
	for (const auto &p : info.action_profiles())
		ids.insert(p.preamble().id());
	for (const auto &c : info.counters())
		ids.insert(c.preamble().id());
	for (const auto &m : info.meters())
		ids.insert(m.preamble().id());
	for (const auto &d : info.digests())
		ids.insert(d.preamble().id());
	for (const auto &r : info.registers())
		ids.insert(r.preamble().id());
	for (const auto &v : info.value_sets())
		ids.insert(v.preamble().id());
	return ids;
}

bool has_unknown_fields(const google::protobuf::Message &message)
{
	return !message.GetReflection()->GetUnknownFields(message).empty();
}

Status invalid(const std::string &role, const std::string &why)
{
	return error(StatusCode::INVALID_ARGUMENT,
		     "role '" + role + "': " + why);
}

// The packet-in filter names a packet_in metadata field of the program,
// with a value that fits its width.
Status check_filter(const std::string &role,
		    const stratum::P4RoleConfig::PacketFilter &filter,
		    const p4cfg::P4Info &info)
{
	if (filter.value().empty())
		return invalid(role, "the packet-in filter has no value");
	for (const auto &header : info.controller_packet_metadata()) {
		if (header.preamble().name() != "packet_in")
			continue;
		for (const auto &m : header.metadata()) {
			if (m.id() != filter.metadata_id())
				continue;
			std::string value = canonical_bytes(filter.value());
			int bits = (int)value.size() * 8;
			for (uint8_t top = (uint8_t)value[0];
			     bits > 0 && !(top & 0x80); top <<= 1)
				bits--;
			if (bits > m.bitwidth())
				return invalid(role, "the packet-in filter's "
						     "value is wider than "
						     "metadata " +
							     m.name());
			return Status::OK;
		}
	}
	return invalid(role, "the packet-in filter names metadata id " +
				     std::to_string(filter.metadata_id()) +
				     ", which the program's packet-in "
				     "does not carry");
}

std::set<uint32_t> both(const std::set<uint32_t> &a,
			const std::set<uint32_t> &b)
{
	std::set<uint32_t> out;
	std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
			      std::inserter(out, out.begin()));
	return out;
}

} // namespace

bool RoleConfig::wants(const p4v1::PacketIn &packet) const
{
	if (!canonical.receives_packet_ins())
		return false;
	if (!canonical.has_packet_in_filter())
		return true;
	const auto &filter = canonical.packet_in_filter();
	for (const auto &m : packet.metadata())
		if (m.metadata_id() == filter.metadata_id() &&
		    canonical_bytes(m.value()) == filter.value())
			return true;
	return false;
}

bool same_config(const std::optional<RoleConfig> &a,
		 const std::optional<RoleConfig> &b)
{
	if (!a || !b)
		return !a && !b;
	return google::protobuf::util::MessageDifferencer::Equals(a->canonical,
								  b->canonical);
}

Status parse_role_config(const std::string &role, const p4v1::Role &message,
			 const Schema &schema,
			 std::optional<RoleConfig> *config)
{
	config->reset();
	if (role.empty()) {
		if (message.has_config())
			return error(StatusCode::INVALID_ARGUMENT,
				     "the default role takes no role "
				     "config: it has full pipeline access");
		return Status::OK;
	}
	if (role.size() > p4rt_bounds::kMaxRoleName)
		return error(StatusCode::INVALID_ARGUMENT,
			     "a role name of " + std::to_string(role.size()) +
				     " bytes: this switch takes at most " +
				     std::to_string(p4rt_bounds::kMaxRoleName));
	if (!message.has_config())
		return invalid(role, "a named role needs a role config "
				     "(stratum.P4RoleConfig); full pipeline "
				     "access is the default role's");
	const auto &any = message.config();
	stratum::P4RoleConfig parsed;
	if (!any.Is<stratum::P4RoleConfig>() || !any.UnpackTo(&parsed))
		return invalid(role, "the role config is a '" + any.type_url() +
					     "', this switch reads "
					     "stratum.P4RoleConfig");
	if (has_unknown_fields(parsed) ||
	    has_unknown_fields(parsed.packet_in_filter()))
		return invalid(role, "the role config has fields this "
				     "switch does not know");
	RoleConfig out;
	out.exclusive.insert(parsed.exclusive_p4_ids().begin(),
			     parsed.exclusive_p4_ids().end());
	out.shared.insert(parsed.shared_p4_ids().begin(),
			  parsed.shared_p4_ids().end());
	std::set<uint32_t> known = writable_ids(schema.p4info);
	for (const auto *ids : {&out.exclusive, &out.shared})
		for (uint32_t id : *ids)
			if (known.count(id) == 0)
				return invalid(role,
					       "P4 id " + std::to_string(id) +
						       " is no table, action "
						       "profile, counter, "
						       "meter or digest of "
						       "the program");
	auto twice = both(out.exclusive, out.shared);
	if (!twice.empty())
		return invalid(role, "P4 id " + std::to_string(*twice.begin()) +
					     " is both exclusive and shared");
	if (parsed.has_packet_in_filter()) {
		if (!parsed.receives_packet_ins())
			return invalid(role, "a packet-in filter, but "
					     "receives_packet_ins is false");
		Status status = check_filter(role, parsed.packet_in_filter(),
					     schema.p4info);
		if (!status.ok())
			return status;
	}
	auto &c = out.canonical;
	for (uint32_t id : out.exclusive)
		c.add_exclusive_p4_ids(id);
	for (uint32_t id : out.shared)
		c.add_shared_p4_ids(id);
	if (parsed.has_packet_in_filter()) {
		c.mutable_packet_in_filter()->set_metadata_id(
			parsed.packet_in_filter().metadata_id());
		c.mutable_packet_in_filter()->set_value(
			canonical_bytes(parsed.packet_in_filter().value()));
	}
	c.set_receives_packet_ins(parsed.receives_packet_ins());
	c.set_can_push_pipeline(parsed.can_push_pipeline());
	*config = std::move(out);
	return Status::OK;
}

uint32_t p4_id_of(const p4v1::Entity &entity)
{
	switch (entity.entity_case()) {
	case p4v1::Entity::kTableEntry:
		return entity.table_entry().table_id();
	case p4v1::Entity::kActionProfileMember:
		return entity.action_profile_member().action_profile_id();
	case p4v1::Entity::kActionProfileGroup:
		return entity.action_profile_group().action_profile_id();
	case p4v1::Entity::kCounterEntry:
		return entity.counter_entry().counter_id();
	case p4v1::Entity::kDirectCounterEntry:
		return entity.direct_counter_entry().table_entry().table_id();
	case p4v1::Entity::kMeterEntry:
		return entity.meter_entry().meter_id();
	case p4v1::Entity::kDirectMeterEntry:
		return entity.direct_meter_entry().table_entry().table_id();
	case p4v1::Entity::kDigestEntry:
		return entity.digest_entry().digest_id();
	case p4v1::Entity::kRegisterEntry:
		return entity.register_entry().register_id();
	case p4v1::Entity::kValueSetEntry:
		return entity.value_set_entry().value_set_id();
	case p4v1::Entity::kExternEntry:
		return entity.extern_entry().extern_id();
	default:
		return 0;
	}
}

// Caller holds mu_. The default role always exists; a named one while
// it has streams. A name that is neither does not match the device's
// roles: `code` says how the caller answers that.
Status Server::check_role(const std::string &role, StatusCode code)
{
	if (role.empty() || roles_.count(role) > 0)
		return Status::OK;
	return error(code, "no role '" + role +
				   "' on this device: a named role exists "
				   "while a client is arbitrated for it");
}

// Caller holds mu_. Whether `stream`'s arbitration for `role` with this
// config may proceed: within the bound on named roles, with the config
// the role has unless the client becomes primary by it (the
// specification: the primary's config is the role's), and with
// exclusive ids no other role claims. `changed`: the role's config
// becomes this one.
Status Server::admit_config(const std::string &role,
			    const std::optional<RoleConfig> &config,
			    const Stream *stream, bool has_election,
			    const Uint128 &election, bool *changed)
{
	*changed = false;
	auto found = roles_.find(role);
	if (found == roles_.end()) {
		if (!role.empty() && roles_.size() - roles_.count("") >=
					     p4rt_bounds::kMaxRoles) {
			g_roles_refused++;
			return error(StatusCode::RESOURCE_EXHAUSTED,
				     std::to_string(p4rt_bounds::kMaxRoles) +
					     " named roles exist, the most "
					     "this switch takes; a role is "
					     "forgotten when its last stream "
					     "ends");
		}
		*changed = true;
	} else if (!same_config(found->second.config, config)) {
		bool becomes_primary = has_election;
		for (const Stream *s : found->second.streams)
			if (s != stream && s->has_election &&
			    !(s->election < election))
				becomes_primary = false;
		if (!becomes_primary)
			return invalid(role,
				       "the role config differs from the "
				       "role's; only a client that becomes "
				       "its primary may change it");
		*changed = true;
	}
	if (!*changed || !config)
		return Status::OK;
	// Stratum's rules: one role's exclusive ids are no other role's,
	// exclusive or shared.
	for (const auto &[name, state] : roles_) {
		if (name == role || !state.config)
			continue;
		const RoleConfig &other = *state.config;
		for (const auto &clash :
		     {both(config->exclusive, other.exclusive),
		      both(config->exclusive, other.shared),
		      both(config->shared, other.exclusive)})
			if (!clash.empty())
				return invalid(
					role,
					"P4 id " +
						std::to_string(*clash.begin()) +
						" is exclusive to one of "
						"this role and role '" +
						name +
						"', and named by the "
						"other");
	}
	return Status::OK;
}

// Caller holds mu_ and has checked the role and its primary. Writes
// are checked update by update (P4Runtime 12.2: an update the role may
// not make is PERMISSION_DENIED, and the others of the batch go on).
Status Server::check_update_role(const std::string &role,
				 const p4v1::Entity &entity)
{
	if (role.empty())
		return Status::OK;
	auto found = roles_.find(role);
	uint32_t id = p4_id_of(entity);
	if (found != roles_.end() && found->second.config &&
	    found->second.config->may_write(id))
		return Status::OK;
	g_role_denials++;
	if (id == 0)
		return error(StatusCode::PERMISSION_DENIED,
			     "role '" + role +
				     "' may not write this entity: it has no "
				     "P4 id (packet replication engine "
				     "entries are the default role's)");
	return error(StatusCode::PERMISSION_DENIED,
		     "role '" + role + "' may not write P4 id " +
			     std::to_string(id) +
			     ": it is not among the role's exclusive or "
			     "shared ids");
}

// Caller holds mu_ and has checked the role and its primary.
Status Server::check_pipeline_push(const std::string &role)
{
	auto found = roles_.find(role);
	if (role.empty() ||
	    (found != roles_.end() && found->second.config &&
	     found->second.config->canonical.can_push_pipeline()))
		return Status::OK;
	g_role_denials++;
	return error(StatusCode::PERMISSION_DENIED,
		     "role '" + role +
			     "' may not set the forwarding pipeline "
			     "(can_push_pipeline is false)");
}

// Caller holds mu_. A named role's primary sends packet-outs only when
// its role takes part in packet I/O (receives_packet_ins): Stratum's
// config has no field of its own for packet-out, and a role that only
// writes tables has no frames to inject.
bool Server::may_packet_out(const Stream *stream)
{
	if (stream->role.empty())
		return true;
	auto found = roles_.find(stream->role);
	if (found != roles_.end() && found->second.config &&
	    found->second.config->canonical.receives_packet_ins())
		return true;
	g_role_denials++;
	return false;
}

// Caller holds mu_. A packet-in goes to the default role's primary and
// to the primary of every named role whose config wants it.
void Server::send_packet_in(const p4v1::StreamMessageResponse &message)
{
	for (const auto &[name, state] : roles_) {
		if (state.primary == nullptr)
			continue;
		if (name.empty() ||
		    (state.config && state.config->wants(message.packet())))
			state.primary->send(message);
	}
}

// Caller holds mu_.
void Server::count_roles()
{
	g_named_roles = roles_.size() - roles_.count("");
}

} // namespace p4rt_server

extern "C" uint64_t sw_p4rt_roles(void)
{
	return p4rt_server::g_named_roles.load();
}

extern "C" uint64_t sw_p4rt_roles_refused(void)
{
	return p4rt_server::g_roles_refused.load();
}

extern "C" uint64_t sw_p4rt_role_denials(void)
{
	return p4rt_server::g_role_denials.load();
}
