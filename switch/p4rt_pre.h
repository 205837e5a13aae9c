// SPDX-License-Identifier: Apache-2.0
//
// The packet replication engine's entries (P4Runtime
// "PacketReplicationEngineEntry"): multicast groups and clone sessions, with
// truncation, validated and kept as written, and read back.
//
// The jumbogate P4 program calls neither multicast nor clone on the
// software target (its v1model top sends one copy of each packet), so the C
// pipeline has no replication to program: these entries are the control
// plane's part, so that a controller that programs the Tofino top's mirror
// sessions can do the same against this switch and read them back.
#ifndef JUMBOGATE_SWITCH_P4RT_PRE_H
#define JUMBOGATE_SWITCH_P4RT_PRE_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "p4/v1/p4runtime.pb.h"
#include "p4rt_bounds.h"
#include "switch.h"

namespace p4rt_pre
{

namespace p4v1 = ::p4::v1;
using grpc::Status;
using grpc::StatusCode;

// Replicas of one group or session: each a distinct (port, instance).
constexpr int kMaxReplicas = 1024;

// INSERTs refused because p4rt_bounds::kMaxMulticastGroups groups or
// kMaxCloneSessions sessions exist (/jumbogate_switch/stats:
// multicast_groups_refused, clone_sessions_refused).
inline std::atomic<uint64_t> g_multicast_groups_refused{0};
inline std::atomic<uint64_t> g_clone_sessions_refused{0};
// INSERTs and MODIFYs refused because they would take the replicas of all
// groups and sessions past p4rt_bounds::kMaxReplicasTotal (replicas_refused).
inline std::atomic<uint64_t> g_replicas_refused{0};

class Engine
{
      public:
	Status write(p4v1::Update::Type type,
		     const p4v1::PacketReplicationEngineEntry &in)
	{
		switch (in.type_case()) {
		case p4v1::PacketReplicationEngineEntry::kMulticastGroupEntry: {
			const auto &g = in.multicast_group_entry();
			// Opaque to the switch: kept and read back, up to
			// its bound.
			if (type != p4v1::Update::DELETE &&
			    g.metadata().size() >
				    p4rt_bounds::kMaxEntryMetadata)
				return Status(StatusCode::INVALID_ARGUMENT,
					      p4rt_bounds::metadata_too_long(
						      g.metadata().size()));
			return apply(type, "multicast group",
				     g.multicast_group_id(), g.replicas(), g,
				     &groups_, p4rt_bounds::kMaxMulticastGroups,
				     &g_multicast_groups_refused);
		}
		case p4v1::PacketReplicationEngineEntry::kCloneSessionEntry: {
			const auto &c = in.clone_session_entry();
			// 0 is no truncation; a negative length is no length.
			if (c.packet_length_bytes() < 0)
				return Status(StatusCode::INVALID_ARGUMENT,
					      "packet_length_bytes is "
					      "negative");
			return apply(type, "clone session", c.session_id(),
				     c.replicas(), c, &sessions_,
				     p4rt_bounds::kMaxCloneSessions,
				     &g_clone_sessions_refused);
		}
		default:
			return Status(StatusCode::INVALID_ARGUMENT,
				      "a packet replication entry without a "
				      "multicast group or clone session");
		}
	}

	// A read: id 0 is every entry of its kind, no kind every entry.
	void read(const p4v1::PacketReplicationEngineEntry &q,
		  std::vector<p4v1::Entity> *out) const
	{
		const bool all =
			q.type_case() ==
			p4v1::PacketReplicationEngineEntry::TYPE_NOT_SET;
		if (all || q.has_multicast_group_entry()) {
			uint32_t id = all ? 0
					  : q.multicast_group_entry()
						      .multicast_group_id();
			for (const auto &[key, entry] : groups_)
				if (id == 0 || id == key)
					*out->emplace_back()
						 .mutable_packet_replication_engine_entry()
						 ->mutable_multicast_group_entry() =
						entry;
		}
		if (all || q.has_clone_session_entry()) {
			uint32_t id =
				all ? 0 : q.clone_session_entry().session_id();
			for (const auto &[key, entry] : sessions_)
				if (id == 0 || id == key)
					*out->emplace_back()
						 .mutable_packet_replication_engine_entry()
						 ->mutable_clone_session_entry() =
						entry;
		}
	}

	void clear()
	{
		groups_.clear();
		sessions_.clear();
		replicas_ = 0;
	}

      private:
	template <typename Entry>
	Status
	apply(p4v1::Update::Type type, const std::string &what, uint32_t id,
	      const google::protobuf::RepeatedPtrField<p4v1::Replica> &replicas,
	      const Entry &in, std::map<uint32_t, Entry> *entries,
	      size_t max_entries, std::atomic<uint64_t> *refused)
	{
		if (type == p4v1::Update::UNSPECIFIED)
			return Status(StatusCode::INVALID_ARGUMENT,
				      "update type is unspecified");
		if (id == 0)
			return Status(StatusCode::INVALID_ARGUMENT,
				      what + " id 0 is not an id");
		bool exists = entries->count(id) > 0;
		const std::string name = what + " " + std::to_string(id);
		if (type == p4v1::Update::INSERT && exists)
			return Status(StatusCode::ALREADY_EXISTS,
				      name + " exists already");
		if (type != p4v1::Update::INSERT && !exists)
			return Status(StatusCode::NOT_FOUND, "no " + name);
		if (type == p4v1::Update::DELETE) {
			replicas_ -= (size_t)entries->at(id).replicas_size();
			entries->erase(id);
			return Status::OK;
		}
		if (type == p4v1::Update::INSERT &&
		    entries->size() >= max_entries) {
			(*refused)++;
			return Status(StatusCode::RESOURCE_EXHAUSTED,
				      name + ": " +
					      std::to_string(max_entries) +
					      " " + what +
					      "s exist, the most this switch "
					      "holds");
		}
		if (replicas.size() > kMaxReplicas)
			return Status(StatusCode::RESOURCE_EXHAUSTED,
				      name + " has more than " +
					      std::to_string(kMaxReplicas) +
					      " replicas");
		std::set<std::pair<uint32_t, uint32_t>> seen;
		for (const auto &r : replicas) {
			uint32_t port = 0;
			std::string why;
			if (!port_of(r, &port, &why))
				return Status(StatusCode::INVALID_ARGUMENT,
					      name + ": " + why);
			if (r.backup_replicas_size() > 0)
				return Status(StatusCode::UNIMPLEMENTED,
					      "backup replicas are not "
					      "supported");
			if (!seen.insert({port, r.instance()}).second)
				return Status(
					StatusCode::INVALID_ARGUMENT,
					name + " lists port " +
						std::to_string(port) +
						", instance " +
						std::to_string(r.instance()) +
						" twice");
		}
		const size_t held =
			exists ? (size_t)entries->at(id).replicas_size() : 0;
		const size_t total = replicas_ - held + (size_t)replicas.size();
		if (total > p4rt_bounds::kMaxReplicasTotal) {
			g_replicas_refused++;
			const std::string bound =
				std::to_string(p4rt_bounds::kMaxReplicasTotal);
			return Status(
				StatusCode::RESOURCE_EXHAUSTED,
				name +
					" would bring the replicas of all "
					"groups and sessions to " +
					std::to_string(total) + ", past the " +
					bound + " this switch holds");
		}
		// Kept as written, less fields this switch does not know:
		// opaque bytes of any size otherwise.
		Entry &kept = (*entries)[id];
		replicas_ = total;
		kept = in;
		kept.DiscardUnknownFields();
		return Status::OK;
	}

	// A replica's port: the bytes of `port` (P4Runtime 1.4) or the
	// deprecated `egress_port`, a P4 port of this switch.
	static bool port_of(const p4v1::Replica &r, uint32_t *port,
			    std::string *why)
	{
		uint64_t value = 0;
		switch (r.port_kind_case()) {
		case p4v1::Replica::kPort:
			if (r.port().empty() || r.port().size() > 8) {
				*why = "a replica's port is 1 to 8 bytes";
				return false;
			}
			for (unsigned char c : r.port())
				value = value << 8 | c;
			break;
		case p4v1::Replica::kEgressPort:
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
			value = r.egress_port();
#pragma GCC diagnostic pop
			break;
		default:
			*why = "a replica without a port";
			return false;
		}
		if (value >= SW_PORTS) {
			*why = "port " + std::to_string(value) +
			       " is not a port of this switch (0.." +
			       std::to_string(SW_PORTS - 1) + ")";
			return false;
		}
		*port = (uint32_t)value;
		return true;
	}

	std::map<uint32_t, p4v1::MulticastGroupEntry> groups_;
	std::map<uint32_t, p4v1::CloneSessionEntry> sessions_;
	// Replicas of every entry of groups_ and sessions_.
	size_t replicas_ = 0;
};

} // namespace p4rt_pre

#endif
