// SPDX-License-Identifier: Apache-2.0
// The schema (p4rt_schema.h): built from the P4Info p4c made from p4src/.
#include "p4rt_schema.h"

namespace p4rt_server
{

static const std::map<std::string, Table> kTables = {
	{P4_TABLE_PORT_ROLES, Table::PortRoles},
	{P4_TABLE_DEPTH_POLICY, Table::DepthPolicy},
	{P4_TABLE_NIC_PORT, Table::NicPort},
	{P4_TABLE_FLEET_POLICY, Table::FleetPolicy},
	{P4_TABLE_INSTANCES_V4, Table::InstancesV4},
	{P4_TABLE_INSTANCES_V6, Table::InstancesV6},
	{P4_TABLE_PATH_MTU_V4, Table::PathMtuV4},
	{P4_TABLE_PATH_MTU_V6, Table::PathMtuV6},
	{P4_TABLE_MERGE_FLOWS, Table::MergeFlows},
	{P4_TABLE_MERGE_SERVICES, Table::MergeServices},
	{P4_TABLE_ELEPHANT_CONFIG, Table::ElephantConfig},
	{P4_TABLE_ROUTES_V4, Table::RoutesV4},
	{P4_TABLE_ROUTES_V6, Table::RoutesV6},
	{P4_TABLE_NEXT_HOPS, Table::NextHops},
	{P4_TABLE_SIGNAL_SOURCE, Table::SignalSource},
};

static const std::map<std::string, sw_counter_id> kCounters = {
	{P4_COUNTER_PORT_RX, SW_COUNTER_PORT_RX},
	{P4_COUNTER_PORT_TX, SW_COUNTER_PORT_TX},
	{P4_COUNTER_DROP_REASONS, SW_COUNTER_DROP_REASONS},
	{P4_COUNTER_PATHS, SW_COUNTER_PATHS},
	{P4_COUNTER_ICMP_SIGNALS, SW_COUNTER_ICMP_SIGNALS},
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
		t.shape = p4_table_shape_of(t.alias.c_str());
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
		// The C tables are sized from the same compile at build
		// time: a P4Info that says otherwise is not the one built in.
		if (t.shape == nullptr || t.shape->size != t.size ||
		    t.shape->key_count != t.fields.size() ||
		    t.shape->key_bytes > SW_KEY_MAX) {
			*why = "table " + t.alias +
			       " of the P4Info is not the shape the switch "
			       "was built with";
			return false;
		}
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
		if (alias_of(profile.preamble()) ==
		    P4_ACTION_PROFILE_ECMP_SELECTOR) {
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
		if (alias == P4_METER_ICMP_SIGNAL_METER ||
		    alias == P4_METER_ICMP_SOURCE_METER)
			schema->meters[meter.preamble().id()] = {alias,
								 meter.size()};
	}
	for (const auto &digest : info.digests())
		if (alias_of(digest.preamble()) == P4_DIGEST_ELEPHANT_DIGEST) {
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
	// The header P4Runtime names "packet_out" (@controller_header).
	for (const auto &header : info.controller_packet_metadata())
		if (header.preamble().name() == "packet_out")
			for (const auto &m : header.metadata())
				schema->packet_out_metadata[m.id()] = {
					m.name(), m.bitwidth()};
	if (schema->ecmp_selector == 0 ||
	    schema->meters.size() != P4_METER_COUNT ||
	    schema->elephant_digest == 0 ||
	    schema->digest_widths.size() != P4_DIGEST_ELEPHANT_DIGEST_MEMBERS ||
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
static std::string
compare_objects(const char *what,
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

} // namespace p4rt_server
