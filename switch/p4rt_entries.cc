// SPDX-License-Identifier: Apache-2.0
// The P4Runtime server's table entries: validation of what a client
// writes, and writing it.
#include "p4rt_server.h"

namespace p4rt_server
{

Status Server::Write(grpc::ServerContext *, const p4v1::WriteRequest *request,
		     p4v1::WriteResponse *)
{
	std::lock_guard<std::mutex> lock(mu_);
	// Who may write comes before what there is to write to.
	Status status = check_writer(*request);
	if (!status.ok())
		return status;
	if (!config_)
		return no_pipeline();
	if (request->atomicity() != p4v1::WriteRequest::CONTINUE_ON_ERROR)
		return error(StatusCode::UNIMPLEMENTED,
			     "only CONTINUE_ON_ERROR atomicity is "
			     "supported");
	if (request->updates_size() > p4rt_bounds::kMaxUpdatesPerBatch)
		return error(StatusCode::RESOURCE_EXHAUSTED,
			     "a batch of " +
				     std::to_string(request->updates_size()) +
				     " updates: this switch takes at most " +
				     std::to_string(
					     p4rt_bounds::kMaxUpdatesPerBatch) +
				     " in one WriteRequest");
	std::vector<Status> results;
	bool failed = false;
	{
		// Each update is applied whole under the data path's
		// lock; packets may pass between two of them.
		p4rt_bounds::DataPlaneWriter writer(&sw_->lock);
		// writer_ is let go however the batch ends: an exception
		// (gRPC answers it UNKNOWN) left it naming a writer gone,
		// for the next rebuild of the hop sets outside a Write.
		struct Unset {
			p4rt_bounds::DataPlaneWriter **writer;
			~Unset()
			{
				*writer = nullptr;
			}
		} unset{&writer_};
		writer_ = &writer;
		for (const auto &update : request->updates()) {
			if (!results.empty())
				writer.pause_if_due();
			Status allowed = check_update_role(request->role(),
							   update.entity());
			results.push_back(allowed.ok() ? write_one(update)
						       : allowed);
			failed |= !results.back().ok();
		}
	}
	uint64_t accepted = 0;
	for (const auto &result : results)
		accepted += result.ok();
	// The record is the fence's audit, and the fence is the default
	// role's: a named role's ids are its own and would read as a
	// fenced controller's.
	if (request->role().empty())
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
				message = message.substr(0,
							 kMaxErrorMessage - 3) +
					  "...";
			e.set_message(message);
			e.set_space("p4.v1");
		}
		details.add_details()->PackFrom(e, "");
	}
	return Status(StatusCode::UNKNOWN, "write failure",
		      details.SerializeAsString());
}

// Decodes and checks one match; on success `canonical` holds the
// entry's canonical match fields.
Status Server::decode_match(const TableInfo &table, const p4v1::TableEntry &in,
			    std::vector<DecodedField> *fields,
			    p4v1::TableEntry *canonical_entry)
{
	fields->assign(table.fields.size(), DecodedField());
	std::set<uint32_t> seen;
	for (const auto &m : in.match()) {
		auto it = std::find_if(table.fields.begin(), table.fields.end(),
				       [&](const FieldInfo &f) {
					       return f.id == m.field_id();
				       });
		if (it == table.fields.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " has no match field id " +
					     std::to_string(m.field_id()));
		if (!seen.insert(m.field_id()).second)
			return error(StatusCode::INVALID_ARGUMENT,
				     "match field " + it->name +
					     " given twice");
		size_t index = it - table.fields.begin();
		Status status = decode_field(table, *it, m, &(*fields)[index]);
		if (!status.ok())
			return status;
	}
	canonical_entry->clear_match();
	for (size_t i = 0; i < table.fields.size(); i++) {
		const FieldInfo &f = table.fields[i];
		const DecodedField &d = (*fields)[i];
		if (!d.present) {
			if (f.type == p4cfg::MatchField::EXACT)
				return error(StatusCode::INVALID_ARGUMENT,
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
			m->mutable_exact()->set_value(canonical(d.value));
			break;
		case p4cfg::MatchField::LPM:
			m->mutable_lpm()->set_value(canonical(d.value));
			m->mutable_lpm()->set_prefix_len(d.prefix_len);
			break;
		case p4cfg::MatchField::TERNARY:
			m->mutable_ternary()->set_value(canonical(d.value));
			m->mutable_ternary()->set_mask(canonical(d.mask));
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

Status Server::decode_field(const TableInfo &table, const FieldInfo &f,
			    const p4v1::FieldMatch &m, DecodedField *d)
{
	std::string why;
	std::string where =
		"match field " + f.name + " of table " + table.alias + ": ";
	auto bad = [&](const std::string &what) {
		return error(StatusCode::INVALID_ARGUMENT, where + what);
	};
	d->present = true;
	switch (f.type) {
	case p4cfg::MatchField::EXACT:
		if (!m.has_exact())
			return bad("must be an exact match");
		if (!decode_bits(m.exact().value(), f.bitwidth, &d->value,
				 &why))
			return bad(why);
		return Status::OK;
	case p4cfg::MatchField::LPM: {
		if (!m.has_lpm())
			return bad("must be an LPM match");
		int length = m.lpm().prefix_len();
		if (length <= 0 || length > f.bitwidth)
			return bad("prefix length " + std::to_string(length) +
				   " is outside 1.." +
				   std::to_string(f.bitwidth) +
				   " (omit the field for a "
				   "default route)");
		if (!decode_bits(m.lpm().value(), f.bitwidth, &d->value, &why))
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
		if (!decode_bits(m.ternary().value(), f.bitwidth, &d->value,
				 &why) ||
		    !decode_bits(m.ternary().mask(), f.bitwidth, &d->mask,
				 &why))
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
		if (!decode_bits(m.range().low(), f.bitwidth, &d->low, &why) ||
		    !decode_bits(m.range().high(), f.bitwidth, &d->high, &why))
			return bad(why);
		if (std::memcmp(d->low.b, d->high.b, 16) > 0)
			return bad("low is above high");
		Bits full = width_mask(f.bitwidth);
		if (d->low.zero() && std::memcmp(d->high.b, full.b, 16) == 0)
			return bad("the full range is a wildcard: "
				   "omit the field");
		return Status::OK;
	}
	default:
		return bad("match kind not supported");
	}
}

Status Server::decode_action(const p4v1::Action &in, DecodedAction *out,
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
		auto it =
			std::find_if(action.params.begin(), action.params.end(),
				     [&](const ParamInfo &info) {
					     return info.id == p.param_id();
				     });
		if (it == action.params.end())
			return error(StatusCode::INVALID_ARGUMENT,
				     "action " + action.alias +
					     " has no parameter id " +
					     std::to_string(p.param_id()));
		size_t index = it - action.params.begin();
		if (seen[index])
			return error(StatusCode::INVALID_ARGUMENT,
				     "parameter " + it->name + " given twice");
		seen[index] = true;
		std::string why;
		if (!decode_bits(p.value(), it->bitwidth, &out->params[index],
				 &why))
			return error(StatusCode::INVALID_ARGUMENT,
				     "parameter " + it->name + " of action " +
					     action.alias + ": " + why);
	}
	for (size_t i = 0; i < seen.size(); i++)
		if (!seen[i])
			return error(StatusCode::INVALID_ARGUMENT,
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
std::string Server::entry_key(const p4v1::TableEntry &canonical_entry)
{
	p4v1::TableEntry key;
	*key.mutable_match() = canonical_entry.match();
	key.set_priority(canonical_entry.priority());
	return key.SerializeAsString();
}

Status Server::write_one(const p4v1::Update &update)
{
	const auto &entity = update.entity();
	switch (entity.entity_case()) {
	case p4v1::Entity::kTableEntry:
		return write_table_entry(update.type(), entity.table_entry());
	case p4v1::Entity::kActionProfileMember:
		return write_member(update.type(),
				    entity.action_profile_member());
	case p4v1::Entity::kActionProfileGroup:
		return write_group(update.type(),
				   entity.action_profile_group());
	case p4v1::Entity::kMeterEntry:
		return write_meter(update.type(), entity.meter_entry());
	case p4v1::Entity::kCounterEntry:
		return write_counter(update.type(), entity.counter_entry());
	case p4v1::Entity::kDigestEntry:
		return write_digest(update.type(), entity.digest_entry());
	case p4v1::Entity::kPacketReplicationEngineEntry:
		return pre_.write(update.type(),
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

Status Server::write_table_entry(p4v1::Update::Type type,
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
	if (type != p4v1::Update::DELETE &&
	    in.metadata().size() > p4rt_bounds::kMaxEntryMetadata)
		return error(
			StatusCode::INVALID_ARGUMENT,
			p4rt_bounds::metadata_too_long(in.metadata().size()));
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
			     "table " + table.alias + " takes no priority");
	if (in.idle_timeout_ns() != 0 && !table.idle_timeout)
		return error(StatusCode::INVALID_ARGUMENT,
			     "table " + table.alias + " has no idle timeout");
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
	Status status = decode_match(table, in, &stored.fields, &stored.entry);
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
		StoredEntry removed = std::move(existing->second);
		entries.erase(existing);
		one_shot_entries_.erase(key);
		return apply_entry(table, removed, true);
	}
	if (type == p4v1::Update::INSERT &&
	    (int64_t)entries.size() >= table.size)
		return error(StatusCode::RESOURCE_EXHAUSTED,
			     "table " + table.alias + " is full (" +
				     std::to_string(table.size) + " entries)");
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
	// Opaque to the switch: kept and read back as written, up to
	// kMaxEntryMetadata bytes (checked above).
	stored.entry.set_metadata(in.metadata());
	// controller_metadata is deprecated in p4runtime.proto in
	// favour of metadata, yet still a field a client may set and
	// read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	stored.entry.set_controller_metadata(in.controller_metadata());
#pragma GCC diagnostic pop
	// Kept first (merge_services and next_hops are rebuilt from what is
	// kept), then given to the data path; an entry the data path refuses
	// is taken back, so that the update changes nothing.
	std::optional<StoredEntry> previous;
	if (existing != entries.end())
		previous = existing->second;
	entries[key] = stored;
	status = apply_entry(table, stored, false);
	if (!status.ok()) {
		if (previous)
			entries[key] = *previous;
		else
			entries.erase(key);
		(void)apply_entry(table, previous ? *previous : stored,
				  !previous);
		return status;
	}
	if (stored.entry.action().has_action_profile_action_set())
		one_shot_entries_.insert(key);
	else
		one_shot_entries_.erase(key);
	return Status::OK;
}

Status Server::decode_table_action(const TableInfo &table,
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
			if (!members_.count(action.action_profile_member_id()))
				return error(
					StatusCode::NOT_FOUND,
					"no action profile member " +
						std::to_string(
							action.action_profile_member_id()));
		} else if (action.has_action_profile_group_id()) {
			if (!groups_.count(action.action_profile_group_id()))
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
		// Fields this switch does not know are not kept: opaque
		// bytes of any size otherwise.
		stored->entry.mutable_action()->DiscardUnknownFields();
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
				std::to_string(action.action().action_id()) +
				" is not an action of table " + table.alias);
	if (table.default_only.count(action.action().action_id()))
		return error(StatusCode::INVALID_ARGUMENT,
			     "that action is only a default action of "
			     "table " +
				     table.alias);
	return decode_action(action.action(), &stored->action,
			     stored->entry.mutable_action()->mutable_action());
}

Status Server::decode_one_shot(const TableInfo &table,
			       const p4v1::TableAction &action,
			       StoredEntry *stored)
{
	if (!members_.empty() || !groups_.empty())
		return error(StatusCode::INVALID_ARGUMENT, kMixedProfile);
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
						p4rt_bounds::kMaxMemberWeight) +
					", got " + std::to_string(a.weight()));
		if (a.watch_kind_case() !=
		    p4v1::ActionProfileAction::WATCH_KIND_NOT_SET)
			return error(StatusCode::UNIMPLEMENTED,
				     "watch ports are not supported");
		total += a.weight();
		DecodedAction decoded;
		auto *canonical_action = out->add_action_profile_actions();
		canonical_action->set_weight(a.weight());
		Status status =
			decode_action(a.action(), &decoded,
				      canonical_action->mutable_action());
		if (!status.ok())
			return status;
		if (decoded.alias != P4_ACTION_SET_NEXT_HOP)
			return error(StatusCode::INVALID_ARGUMENT,
				     "table " + table.alias +
					     " takes set_next_hop");
		stored->one_shot.push_back({hop_of(decoded), a.weight()});
	}
	if (total > max_size)
		return error(StatusCode::RESOURCE_EXHAUSTED,
			     "the one-shot weights add up to " +
				     std::to_string(total) + ", above the " +
				     std::to_string(max_size) +
				     " this switch holds in a group");
	return Status::OK;
}

} // namespace p4rt_server
