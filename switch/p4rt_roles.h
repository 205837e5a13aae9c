// SPDX-License-Identifier: Apache-2.0
//
// Named roles (P4Runtime "Role Config"), configured with Stratum's
// P4RoleConfig: which P4 entities a role's primary may write, whether it
// receives packet-ins (and which), whether it may push a pipeline. The
// default role (an empty name) takes no config and may do everything.
// docs/switch.md ("Roles") lists each rule and refusal; the Server's
// methods that apply them are in p4rt_roles.cc.
#pragma once

#include "p4rt_schema.h"

#include "stratum/p4_role_config.pb.h"

namespace p4rt_server
{

// A named role's config as the switch keeps it: the client's message in
// canonical form (ids sorted and deduplicated, the filter's value without
// leading zeros), so that two clients sending the same config in another
// order agree, and the sets the checks use.
struct RoleConfig {
	stratum::P4RoleConfig canonical;
	std::set<uint32_t> exclusive, shared;

	bool may_write(uint32_t id) const
	{
		return exclusive.count(id) > 0 || shared.count(id) > 0;
	}
	// Whether a packet-in goes to this role's primary.
	bool wants(const p4v1::PacketIn &packet) const;
};

bool same_config(const std::optional<RoleConfig> &a,
		 const std::optional<RoleConfig> &b);

// Reads the config of an arbitration for `role`: none for the default
// role, one for every named role (an unset config would mean full
// pipeline access beside the default role's primary, which the switch
// leaves to the default role alone). INVALID_ARGUMENT, the
// specification's answer to a config outside the agreed scheme, for an
// Any of another type, ids the program lacks, or a packet-in filter that
// cannot match.
Status parse_role_config(const std::string &role, const p4v1::Role &message,
			 const Schema &schema,
			 std::optional<RoleConfig> *config);

// The P4 id a write of this entity is checked against; 0 for those that
// have none (packet replication engine entries), which no named role may
// write.
uint32_t p4_id_of(const p4v1::Entity &entity);

// Arbitrations refused because kMaxRoles named roles exist; writes'
// updates, pipeline pushes and packet-outs a role's config refused; named
// roles now (/jumbogate_switch/stats: roles_refused, role_denials,
// roles).
extern std::atomic<uint64_t> g_roles_refused;
extern std::atomic<uint64_t> g_role_denials;
extern std::atomic<uint64_t> g_named_roles;

} // namespace p4rt_server
