// SPDX-License-Identifier: Apache-2.0
//
// The schema: what the server knows of the program from its P4Info (the
// tables the C pipeline implements, their fields, actions and sizes), and
// the comparison of a client's P4Info with it.
#pragma once

#include "p4rt_common.h"

namespace p4rt_server
{

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

// A field of the P4Info's packet-out controller header.
struct PacketMetadataInfo {
	std::string name;
	int bitwidth; // 0: a translated type, sent as an SDN string
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
	// What the compile says of it (p4_tables.h): key layout, default.
	const p4_table_shape *shape = nullptr;
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
	// By metadata id: what every PacketOut carries, precisely one of
	// each. None when the program has no packet-out controller header.
	std::map<uint32_t, PacketMetadataInfo> packet_out_metadata;

	const TableInfo *table(const std::string &alias) const
	{
		for (const auto &[id, t] : tables)
			if (t.alias == alias)
				return &t;
		return nullptr;
	}
};

std::string alias_of(const p4cfg::Preamble &preamble);

// Builds the schema from the program's P4Info; false (with why) when the
// P4Info lacks something the C pipeline implements.
bool build_schema(const std::string &text, Schema *schema, std::string *why);

// The first difference between a client's P4Info and this switch's, in
// words; empty when they describe the same pipeline.
std::string compare_p4info(const p4cfg::P4Info &mine,
			   const p4cfg::P4Info &theirs);

} // namespace p4rt_server
