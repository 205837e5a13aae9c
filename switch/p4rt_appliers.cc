// SPDX-License-Identifier: Apache-2.0
// The adapter from the P4Runtime server to the C tables (pipeline.h):
// per-table appliers of entries and defaults, the ECMP selector's members
// and groups, meters, counters and digest configuration.
#include "p4rt_server.h"

namespace p4rt_server
{

// A decoded action's argument by parameter name (a P4_PARAM_* of
// p4_tables.h): zeros when the action has no parameter of that name.
Bits Server::arg(const DecodedAction &action, const char *name)
{
	auto info = schema_.actions.find(action.id);
	if (info != schema_.actions.end())
		for (size_t i = 0;
		     i < info->second.params.size() && i < action.params.size();
		     i++)
			if (info->second.params[i].name == name)
				return action.params[i];
	return Bits();
}

// The next hop of a decoded set_next_hop.
sw_next_hop Server::hop_of(const DecodedAction &action)
{
	sw_next_hop hop = {};
	hop.port = (uint16_t)arg(action, P4_PARAM_SET_NEXT_HOP_PORT).u64();
	Bits src = arg(action, P4_PARAM_SET_NEXT_HOP_SRC_MAC);
	Bits dst = arg(action, P4_PARAM_SET_NEXT_HOP_DST_MAC);
	std::memcpy(hop.src_mac, src.tail(sizeof(hop.src_mac)),
		    sizeof(hop.src_mac));
	std::memcpy(hop.dst_mac, dst.tail(sizeof(hop.dst_mac)),
		    sizeof(hop.dst_mac));
	return hop;
}

// What a C table answered, as the update's status: a table full in the
// data path refuses the entry (RESOURCE_EXHAUSTED) rather than the server
// keeping an entry that packets never meet. Removing what is already
// gone is no error.
static Status c_table_status(const TableInfo &table, int result, bool remove)
{
	if (result == 0 || (remove && result == -ENOENT))
		return Status::OK;
	if (result == -ENOSPC || result == -ENOMEM)
		return error(StatusCode::RESOURCE_EXHAUSTED,
			     "table " + table.alias + " is full (" +
				     std::to_string(table.size) + " entries)");
	return error(StatusCode::INTERNAL,
		     "table " + table.alias +
			     " refused the entry: " + std::strerror(-result));
}

// Copies one entry into the C table (or removes it), after entries_ holds
// the change: merge_services and next_hops are rebuilt from entries_.
// Validation is done; what can still fail is the C table's room.
Status Server::apply_entry(const TableInfo &table, const StoredEntry &stored,
			   bool remove)
{
	sw_tables *t = &sw_->pipeline.tables;
	const auto &f = stored.fields;
	uint8_t key[SW_KEY_MAX];
	int result = 0;
	switch (table.kind) {
	case Table::PortRoles:
		t->port_role[f[0].value.u64() % SW_PORTS] =
			remove ? P4_PORT_ROLE_UNASSIGNED
			       : (uint8_t)arg(stored.action,
					      P4_PARAM_SET_PORT_ROLE_ROLE)
					 .u64();
		break;
	case Table::InstancesV4:
	case Table::InstancesV6:
	case Table::MergeFlows: {
		sw_hash *hash =
			table.kind == Table::InstancesV4   ? &t->instances_v4
			: table.kind == Table::InstancesV6 ? &t->instances_v6
							   : &t->merge_flows;
		// merge_flows keeps the idle timeout, instances the flag.
		uint64_t value =
			table.kind == Table::MergeFlows
				? (uint64_t)stored.entry.idle_timeout_ns()
				: arg(stored.action,
				      P4_PARAM_SET_INSTANCE_JUMBO_ENABLED)
					  .u64();
		pack_key(table, stored, key);
		result = remove ? sw_hash_remove(hash, key)
				: sw_hash_put(hash, key, value, sw_now_ns());
		break;
	}
	case Table::PathMtuV4:
	case Table::PathMtuV6:
	case Table::RoutesV4:
	case Table::RoutesV6: {
		bool routes = table.kind == Table::RoutesV4 ||
			      table.kind == Table::RoutesV6;
		sw_lpm *lpm = table.kind == Table::PathMtuV4   ? &t->path_mtu_v4
			      : table.kind == Table::PathMtuV6 ? &t->path_mtu_v6
			      : table.kind == Table::RoutesV4  ? &t->routes_v4
							       : &t->routes_v6;
		uint64_t value =
			routes ? arg(stored.action,
				     P4_PARAM_SET_NEXT_HOP_GROUP_GROUP_ID)
					 .u64()
			       : arg(stored.action, P4_PARAM_SET_PATH_MTU_MTU)
					 .u64();
		const uint8_t *addr = f[0].value.tail(table.shape->key_bytes);
		result = remove ? sw_lpm_remove(lpm, addr, f[0].prefix_len)
				: sw_lpm_put(lpm, addr, f[0].prefix_len, value);
		break;
	}
	case Table::MergeServices:
		result = rebuild_services(table);
		break;
	case Table::NextHops:
		result = rebuild_next_hops();
		break;
	default:
		break;
	}
	return c_table_status(table, result, remove);
}

// An exact key's bytes as the C tables hold them: each field at its place
// in the compile's layout (p4_tables.h), where the data path packs a
// packet's fields too (sw_flow_key).
void Server::pack_key(const TableInfo &table, const StoredEntry &stored,
		      uint8_t key[SW_KEY_MAX])
{
	std::memset(key, 0, SW_KEY_MAX);
	for (uint32_t i = 0; i < table.shape->key_count; i++) {
		const p4_key_field &f = table.shape->key[i];
		std::memcpy(key + f.offset,
			    stored.fields[i].value.tail(f.bytes), f.bytes);
	}
}

// merge_services in the C pipeline, whole: 0, or -ENOSPC when the rules
// do not fit (the C table then keeps the rules it had).
int Server::rebuild_services(const TableInfo &table)
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
			if (name == P4_KEY_MERGE_SERVICES_IP_VERSION) {
				rule.ip_version = (uint8_t)d.value.u64();
			} else if (name == P4_KEY_MERGE_SERVICES_DST_ADDR) {
				std::memcpy(rule.addr, d.value.b, 16);
				std::memcpy(rule.mask, d.mask.b, 16);
			} else if (name == P4_KEY_MERGE_SERVICES_DST_PORT) {
				rule.port_lo = (uint16_t)d.low.u64();
				rule.port_hi = (uint16_t)d.high.u64();
			}
		}
		rule.priority = stored.entry.priority();
		rules.push_back(rule);
	}
	return sw_ternary_set(&sw_->pipeline.tables.merge_services,
			      rules.data(), (uint32_t)rules.size());
}

Status Server::write_default(p4v1::Update::Type type, const TableInfo &table,
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
		return error(StatusCode::INVALID_ARGUMENT,
			     "a default action must be a direct action");
	if (!table.actions.count(action.action().action_id()) ||
	    table.table_only.count(action.action().action_id()))
		return error(
			StatusCode::INVALID_ARGUMENT,
			"action id " +
				std::to_string(action.action().action_id()) +
				" cannot be the default action of "
				"table " +
				table.alias);
	Status status =
		decode_action(action.action(), &stored.action,
			      stored.entry.mutable_action()->mutable_action());
	if (!status.ok())
		return status;
	defaults_[table.id] = stored;
	apply_default(table, stored.action);
	return Status::OK;
}

// The program's default action of a table whose default a controller may
// change, as the compile has it (p4_tables.h); none for a const default.
DecodedAction Server::initial_default(const TableInfo &table)
{
	DecodedAction action;
	const p4_table_shape *shape = table.shape;
	if (shape->default_action == nullptr || shape->const_default)
		return action;
	action.alias = shape->default_action;
	action.id = schema_.action_ids[action.alias];
	const ActionInfo &info = schema_.actions[action.id];
	action.params.assign(info.params.size(), Bits());
	for (uint32_t a = 0; a < shape->default_arg_count; a++)
		for (size_t i = 0; i < info.params.size(); i++)
			if (info.params[i].name == shape->default_args[a].param)
				std::memcpy(action.params[i].b,
					    shape->default_args[a].value,
					    sizeof(action.params[i].b));
	return action;
}

p4v1::TableEntry Server::default_entry(const TableInfo &table)
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

// The pipeline reads a default action's arguments by parameter name, as
// it reads the compile's (sw_set_default).
void Server::apply_default(const TableInfo &table, const DecodedAction &action)
{
	std::vector<p4_default_arg> args;
	auto info = schema_.actions.find(action.id);
	if (info != schema_.actions.end())
		for (size_t i = 0;
		     i < info->second.params.size() && i < action.params.size();
		     i++) {
			p4_default_arg a{};
			a.param = info->second.params[i].name.c_str();
			std::memcpy(a.value, action.params[i].b,
				    sizeof(a.value));
			args.push_back(a);
		}
	sw_set_default(&sw_->pipeline.tables, table.alias.c_str(),
		       action.alias.c_str(), args.data(),
		       (uint32_t)args.size());
}

// What a member's and a group's write check first: the action profile,
// that it is not programmed one-shot, and the update type against what
// exists.
Status Server::check_profile_write(p4v1::Update::Type type, uint32_t profile_id,
				   bool exists, const std::string &what)
{
	if (profile_id != schema_.ecmp_selector)
		return error(StatusCode::INVALID_ARGUMENT,
			     "unknown action profile id " +
				     std::to_string(profile_id));
	if (!one_shot_entries_.empty())
		return error(StatusCode::INVALID_ARGUMENT, kMixedProfile);
	return check_presence(type, exists, what);
}

Status Server::write_member(p4v1::Update::Type type,
			    const p4v1::ActionProfileMember &in)
{
	auto existing = members_.find(in.member_id());
	Status status = check_profile_write(
		type, in.action_profile_id(), existing != members_.end(),
		"member " + std::to_string(in.member_id()));
	if (!status.ok())
		return status;
	if (type == p4v1::Update::DELETE) {
		if (member_in_use(in.member_id()))
			return error(StatusCode::FAILED_PRECONDITION,
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
	if (action.alias != P4_ACTION_SET_NEXT_HOP)
		return error(StatusCode::INVALID_ARGUMENT,
			     "members of " P4_ACTION_PROFILE_ECMP_SELECTOR
			     " take " P4_ACTION_SET_NEXT_HOP);
	member.hop = hop_of(action);
	std::optional<Member> previous;
	if (existing != members_.end())
		previous = existing->second;
	members_[in.member_id()] = member;
	if (rebuild_next_hops() != 0) {
		// The data path's hop sets are as they were: so is the
		// member.
		if (previous)
			members_[in.member_id()] = *previous;
		else
			members_.erase(in.member_id());
		return hop_sets_refused("member " +
					std::to_string(in.member_id()));
	}
	return Status::OK;
}

bool Server::member_in_use(uint32_t member_id)
{
	for (const auto &[id, group] : groups_)
		for (const auto &m : group.group.members())
			if (m.member_id() == member_id)
				return true;
	const TableInfo *hops = schema_.table(P4_TABLE_NEXT_HOPS);
	for (const auto &[key, stored] : entries_[hops->id])
		if (stored.entry.action().has_action_profile_member_id() &&
		    stored.entry.action().action_profile_member_id() ==
			    member_id)
			return true;
	return false;
}

Status Server::write_group(p4v1::Update::Type type,
			   const p4v1::ActionProfileGroup &in)
{
	auto existing = groups_.find(in.group_id());
	Status status = check_profile_write(
		type, in.action_profile_id(), existing != groups_.end(),
		"group " + std::to_string(in.group_id()));
	if (!status.ok())
		return status;
	if (type == p4v1::Update::DELETE) {
		const TableInfo *hops = schema_.table(P4_TABLE_NEXT_HOPS);
		for (const auto &[key, stored] : entries_[hops->id])
			if (stored.entry.action()
				    .has_action_profile_group_id() &&
			    stored.entry.action().action_profile_group_id() ==
				    in.group_id())
				return error(
					StatusCode::FAILED_PRECONDITION,
					"group " +
						std::to_string(in.group_id()) +
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
			"max_size of group " + std::to_string(in.group_id()) +
				" is " +
				std::to_string(
					existing->second.group.max_size()) +
				" and cannot change (asked " +
				std::to_string(in.max_size()) + ")");
	// The most this switch holds in one group (sum of weights):
	// the P4Info's max_group_size, else the profile's size.
	const int64_t target_max = schema_.ecmp_max_group_size > 0
					   ? schema_.ecmp_max_group_size
					   : schema_.ecmp_size;
	int64_t max_size = in.max_size() > 0 ? in.max_size() : target_max;
	if (schema_.ecmp_max_group_size > 0 &&
	    max_size > schema_.ecmp_max_group_size)
		return error(
			StatusCode::INVALID_ARGUMENT,
			"max_size " + std::to_string(max_size) +
				" is above the profile's " +
				std::to_string(schema_.ecmp_max_group_size));
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
			return error(StatusCode::NOT_FOUND,
				     "no member " +
					     std::to_string(m.member_id()));
		if (!seen.insert(m.member_id()).second)
			return error(StatusCode::INVALID_ARGUMENT,
				     "member " + std::to_string(m.member_id()) +
					     " listed twice");
		if (m.weight() <= 0)
			return error(StatusCode::INVALID_ARGUMENT,
				     "member " + std::to_string(m.member_id()) +
					     " has weight " +
					     std::to_string(m.weight()) +
					     ": a weight is positive");
		if (m.weight() > p4rt_bounds::kMaxMemberWeight)
			return error(
				StatusCode::RESOURCE_EXHAUSTED,
				"weight " + std::to_string(m.weight()) +
					" is above the " +
					std::to_string(
						p4rt_bounds::kMaxMemberWeight) +
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
	// Fields this switch does not know are not kept: opaque bytes of
	// any size otherwise.
	group.group.DiscardUnknownFields();
	std::optional<Group> previous;
	if (existing != groups_.end())
		previous = existing->second;
	groups_[in.group_id()] = group;
	if (rebuild_next_hops() != 0) {
		// The data path's hop sets are as they were: so is the
		// group.
		if (previous)
			groups_[in.group_id()] = *previous;
		else
			groups_.erase(in.group_id());
		return hop_sets_refused("group " +
					std::to_string(in.group_id()));
	}
	return Status::OK;
}

// A member's or group's write whose hop sets could not be rebuilt: the
// update fails, and what was in force before it (the member or group,
// the data path's hop sets) stays.
Status Server::hop_sets_refused(const std::string &what)
{
	return error(StatusCode::RESOURCE_EXHAUSTED,
		     "no memory to rebuild the hop sets of " P4_TABLE_NEXT_HOPS
		     " with " +
			     what + ": nothing was changed");
}

// next_hops in the C pipeline: each entry's hop set, members in
// member-id order with weights expanded (BMv2 picks hash % size over
// its members, ordered by handle, which follows creation order). All or
// nothing: every set is built before any is put in place, so on -ENOMEM
// the data path keeps every set it had, and the caller puts back what it
// changed. The sets are built from the server's state alone, so a Write
// builds them with the data path's lock let go (the workers forward by
// the sets in place meanwhile) and holds it only to swap them in.
int Server::rebuild_next_hops()
{
	sw_tables *t = &sw_->pipeline.tables;
	// Sized before the sets are built, so that nothing past them can
	// fail with the sets half in place.
	std::vector<sw_hop_set *> replaced;
	try {
		replaced.assign(std::size(t->next_hops), nullptr);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
	std::vector<std::pair<uint32_t, sw_hop_set *>> built;
	auto build = [&] { return build_hop_sets(&built); };
	int result =
		writer_ != nullptr ? writer_->without_lock(build) : build();
	if (result != 0)
		return result;
	for (uint32_t i = 0; i < std::size(t->next_hops); i++)
		std::swap(replaced[i], t->next_hops[i]);
	for (const auto &[group_id, set] : built)
		t->next_hops[group_id] = set;
	// Freed after the swap: what the workers no longer see.
	for (sw_hop_set *old : replaced)
		std::free(old);
	return 0;
}

// Every next_hops entry's hop set, from entries_, members_ and groups_;
// -ENOMEM with nothing left allocated, whether calloc fails or the lists
// cannot grow (std::bad_alloc, which used to leave the Write with the
// data path's lock let go twice).
int Server::build_hop_sets(
	std::vector<std::pair<uint32_t, sw_hop_set *>> *built)
try {
	const TableInfo *hops = schema_.table(P4_TABLE_NEXT_HOPS);
	const auto &entries = entries_[hops->id];
	// Room for every set first: a set allocated is in built at once,
	// where a failure frees it.
	built->reserve(entries.size());
	for (const auto &[key, stored] : entries) {
		// The key is the whole group id (p4_tables.h sizes the
		// array by its width).
		uint32_t group_id = (uint32_t)stored.fields[0].value.u64();
		std::vector<sw_next_hop> list;
		const auto &action = stored.entry.action();
		if (action.has_action_profile_action_set()) {
			for (const auto &[hop, weight] : stored.one_shot)
				for (int32_t w = 0; w < weight; w++)
					list.push_back(hop);
		} else if (action.has_action_profile_member_id()) {
			auto m = members_.find(
				action.action_profile_member_id());
			if (m != members_.end())
				list.push_back(m->second.hop);
		} else {
			auto g = groups_.find(action.action_profile_group_id());
			if (g != groups_.end()) {
				std::vector<std::pair<uint32_t, int>> order;
				for (const auto &m : g->second.group.members())
					order.push_back({m.member_id(),
							 m.weight() > 0
								 ? m.weight()
								 : 1});
				std::sort(order.begin(), order.end());
				for (const auto &[id, weight] : order)
					for (int w = 0; w < weight; w++)
						list.push_back(
							members_[id].hop);
			}
		}
		auto *set = static_cast<sw_hop_set *>(std::calloc(
			1, sizeof(sw_hop_set) +
				   list.size() * sizeof(sw_next_hop)));
		if (set == nullptr) {
			for (const auto &unused : *built)
				std::free(unused.second);
			built->clear();
			return -ENOMEM;
		}
		set->count = (uint32_t)list.size();
		std::copy(list.begin(), list.end(), set->hops);
		built->push_back({group_id, set});
	}
	return 0;
} catch (const std::bad_alloc &) {
	for (const auto &unused : *built)
		std::free(unused.second);
	built->clear();
	return -ENOMEM;
}

// The pipeline's cells of a meter of the schema.
struct sw_meter *Server::meter_cells(uint32_t meter_id)
{
	const auto &alias = schema_.meters.at(meter_id).first;
	return alias == P4_METER_ICMP_SOURCE_METER
		       ? sw_->pipeline.icmp_source_meter
		       : sw_->pipeline.icmp_signal_meter;
}

Status Server::write_meter(p4v1::Update::Type type, const p4v1::MeterEntry &in)
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
	if (in.has_config() && (c.cir() < 0 || c.cburst() < 0 || c.pir() < 0 ||
				c.pburst() < 0 || c.cir() > c.pir()))
		return error(StatusCode::INVALID_ARGUMENT,
			     "meter rates and bursts must be positive "
			     "with cir <= pir");
	if (in.has_config() && (c.pir() == 0 || c.pburst() == 0))
		return error(StatusCode::INVALID_ARGUMENT,
			     "a configured meter needs pir and pburst "
			     "above 0");
	sw_meter_set(&meter_cells(in.meter_id())[index], (uint64_t)c.cir(),
		     (uint64_t)c.cburst(), (uint64_t)c.pir(),
		     (uint64_t)c.pburst(), sw_now_ns());
	if (in.has_config()) {
		auto &kept = meters_[{in.meter_id(), index}];
		kept = c;
		kept.DiscardUnknownFields(); // opaque bytes otherwise
	} else {
		meters_.erase({in.meter_id(), index});
	}
	return Status::OK;
}

Status Server::write_counter(p4v1::Update::Type type,
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
	sw_counter_write(&sw_->pipeline, sw_->worker_count, found->second.first,
			 (uint32_t)index, value);
	return Status::OK;
}

Status Server::write_digest(p4v1::Update::Type type,
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
		// DELETE disables the digest (P4Runtime "DigestEntry"): what
		// was kept under the config goes with it, so that a config
		// inserted again starts with nothing pending and nothing
		// remembered as sent.
		digest_config_.reset();
		forget_digests();
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
		return error(StatusCode::INVALID_ARGUMENT,
			     "max_timeout_ns is at most " +
				     std::to_string(
					     p4rt_bounds::kMaxDigestTimeoutNs) +
				     " and max_list_size at most " +
				     std::to_string(
					     p4rt_bounds::kMaxDigestListSize) +
				     " here");
	digest_config_ = DigestConfig{c};
	digest_config_->config.DiscardUnknownFields(); // opaque bytes otherwise
	return Status::OK;
}

} // namespace p4rt_server
