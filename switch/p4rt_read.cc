// SPDX-License-Identifier: Apache-2.0
// The P4Runtime server's Read: entities in their canonical form.
#include "p4rt_server.h"

namespace p4rt_server
{

// A Read past p4rt_bounds::kMaxReadEntities: refused whole, counted.
static Status too_large_read()
{
	g_reads_refused++;
	return error(StatusCode::RESOURCE_EXHAUSTED,
		     "the read names or would look at more than " +
			     std::to_string(p4rt_bounds::kMaxReadEntities) +
			     " entities, the most this switch reads at once: "
			     "read fewer in one request");
}

Status Server::Read(grpc::ServerContext *, const p4v1::ReadRequest *request,
		    grpc::ServerWriter<p4v1::ReadResponse> *writer)
{
	if ((size_t)request->entities_size() > p4rt_bounds::kMaxReadEntities)
		return too_large_read();
	ReadOut read;
	{
		std::lock_guard<std::mutex> lock(mu_);
		Status status = check_readable(request->device_id());
		if (!status.ok())
			return status;
		for (const auto &entity : request->entities()) {
			status = read_one(entity, &read);
			if (!status.ok())
				return status;
		}
	}
	std::vector<p4v1::Entity> &out = read.entities;
	for (size_t i = 0; i < out.size() || i == 0; i += kReadBatch) {
		p4v1::ReadResponse reply;
		for (size_t j = i; j < out.size() && j < i + kReadBatch; j++)
			*reply.add_entities() = std::move(out[j]);
		if (!writer->Write(reply))
			break;
		if (out.empty())
			break;
	}
	return Status::OK;
}

// Each expansion looks at its entities one by one (out->look()), so a
// Read past the bound stops at the first entity beyond it.
Status Server::read_one(const p4v1::Entity &entity, ReadOut *out)
{
	switch (entity.entity_case()) {
	case p4v1::Entity::kTableEntry:
		return read_table_entries(entity.table_entry(), out);
	case p4v1::Entity::kActionProfileMember: {
		const auto &q = entity.action_profile_member();
		if (q.action_profile_id() != 0 &&
		    q.action_profile_id() != schema_.ecmp_selector)
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown action profile id");
		for (const auto &[id, m] : members_) {
			if (!out->look())
				return too_large_read();
			if (q.member_id() == 0 || q.member_id() == id)
				*out->add()->mutable_action_profile_member() =
					m.member;
		}
		return Status::OK;
	}
	case p4v1::Entity::kActionProfileGroup: {
		const auto &q = entity.action_profile_group();
		if (q.action_profile_id() != 0 &&
		    q.action_profile_id() != schema_.ecmp_selector)
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown action profile id");
		for (const auto &[id, g] : groups_) {
			if (!out->look())
				return too_large_read();
			if (q.group_id() == 0 || q.group_id() == id)
				*out->add()->mutable_action_profile_group() =
					g.group;
		}
		return Status::OK;
	}
	case p4v1::Entity::kCounterEntry:
		return read_counters(entity.counter_entry(), out);
	case p4v1::Entity::kMeterEntry: {
		const auto &q = entity.meter_entry();
		if (q.meter_id() != 0 && !schema_.meters.count(q.meter_id()))
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown meter id");
		if (q.meter_id() == 0 && q.has_index())
			return error(StatusCode::INVALID_ARGUMENT,
				     "a meter read with an index needs "
				     "its meter id");
		for (const auto &[id, meter] : schema_.meters) {
			if (q.meter_id() != 0 && q.meter_id() != id)
				continue;
			int64_t first = 0, last = meter.second - 1;
			if (q.has_index()) {
				if (q.index().index() < 0 ||
				    q.index().index() > last)
					return error(StatusCode::OUT_OF_RANGE,
						     "meter index out of "
						     "range");
				first = last = q.index().index();
			}
			for (int64_t i = first; i <= last; i++) {
				if (!out->look())
					return too_large_read();
				auto *m = out->add()->mutable_meter_entry();
				m->set_meter_id(id);
				m->mutable_index()->set_index(i);
				auto c = meters_.find({id, i});
				if (c != meters_.end())
					*m->mutable_config() = c->second;
			}
		}
		return Status::OK;
	}
	case p4v1::Entity::kDigestEntry: {
		const auto &q = entity.digest_entry();
		if (q.digest_id() != 0 &&
		    q.digest_id() != schema_.elephant_digest)
			return error(StatusCode::INVALID_ARGUMENT,
				     "unknown digest id");
		if (digest_config_) {
			if (!out->look())
				return too_large_read();
			auto *d = out->add()->mutable_digest_entry();
			d->set_digest_id(schema_.elephant_digest);
			*d->mutable_config() = digest_config_->config;
		}
		return Status::OK;
	}
	case p4v1::Entity::kPacketReplicationEngineEntry: {
		// At most every group and session (p4rt_pre.h's bounds).
		size_t before = out->entities.size();
		pre_.read(entity.packet_replication_engine_entry(),
			  &out->entities);
		if (!out->look(out->entities.size() - before))
			return too_large_read();
		return Status::OK;
	}
	case p4v1::Entity::kRegisterEntry:
		return error(StatusCode::UNIMPLEMENTED,
			     "registers are not readable over "
			     "P4Runtime (as on BMv2)");
	case p4v1::Entity::ENTITY_NOT_SET:
		return error(StatusCode::INVALID_ARGUMENT,
			     "an entity of the read is empty");
	default:
		return error(StatusCode::UNIMPLEMENTED,
			     "this switch does not read that kind of "
			     "entity");
	}
}

Status Server::read_table_entries(const p4v1::TableEntry &q, ReadOut *out)
{
	if (q.table_id() != 0 && !schema_.tables.count(q.table_id()))
		return error(StatusCode::INVALID_ARGUMENT,
			     "unknown table id " +
				     std::to_string(q.table_id()));
	if (q.table_id() != 0 && q.has_time_since_last_hit() &&
	    !schema_.tables.at(q.table_id()).idle_timeout)
		return error(StatusCode::INVALID_ARGUMENT,
			     "table " + schema_.tables.at(q.table_id()).alias +
				     " has no idle timeout: no "
				     "time_since_last_hit");
	// A read filters on what it sets (P4Runtime 11.1): the match
	// (with its priority), the priority alone, the action id.
	const uint32_t action_filter =
		q.action().has_action() ? q.action().action().action_id() : 0;
	uint64_t now = sw_now_ns();
	for (const auto &[id, table] : schema_.tables) {
		if (q.table_id() != 0 && q.table_id() != id)
			continue;
		if (q.is_default_action()) {
			if (!out->look())
				return too_large_read();
			if (table.action_profile == 0)
				*out->add()->mutable_table_entry() =
					default_entry(table);
			continue;
		}
		std::string only;
		if (q.match_size() > 0) {
			if (q.table_id() == 0)
				return error(StatusCode::INVALID_ARGUMENT,
					     "a match needs a table id");
			StoredEntry probe;
			probe.entry.set_priority(q.priority());
			Status status = decode_match(table, q, &probe.fields,
						     &probe.entry);
			if (!status.ok())
				return status;
			only = entry_key(probe.entry);
		}
		// A match names one entry: it alone is looked at.
		auto &held = entries_[id];
		auto it = only.empty() ? held.begin() : held.find(only);
		for (; it != held.end(); ++it) {
			auto &[key, stored] = *it;
			if (!only.empty() && key != only)
				break;
			if (!out->look())
				return too_large_read();
			if (only.empty() && q.priority() != 0 &&
			    stored.entry.priority() != q.priority())
				continue;
			if (action_filter != 0 &&
			    (!stored.entry.action().has_action() ||
			     stored.entry.action().action().action_id() !=
				     action_filter))
				continue;
			auto *entry = out->add()->mutable_table_entry();
			*entry = stored.entry;
			if (q.has_time_since_last_hit() &&
			    table.kind == Table::MergeFlows) {
				uint8_t c_key[SW_KEY_MAX];
				pack_key(table, stored, c_key);
				const sw_hash_slot *slot = sw_hash_find(
					&sw_->pipeline.tables.merge_flows,
					c_key);
				entry->mutable_time_since_last_hit()
					->set_elapsed_ns((int64_t)sw_idle_ns(
						slot ? sw_slot_last_hit(slot)
						     : now,
						now));
			}
		}
	}
	return Status::OK;
}

Status Server::read_counters(const p4v1::CounterEntry &q, ReadOut *out)
{
	if (q.counter_id() != 0 && !schema_.counters.count(q.counter_id()))
		return error(StatusCode::INVALID_ARGUMENT,
			     "unknown counter id " +
				     std::to_string(q.counter_id()));
	for (const auto &[id, counter] : schema_.counters) {
		if (q.counter_id() != 0 && q.counter_id() != id)
			continue;
		int64_t first = 0, last = counter.second - 1;
		if (q.has_index()) {
			if (q.index().index() < 0 || q.index().index() > last)
				return error(StatusCode::OUT_OF_RANGE,
					     "counter index out of range");
			first = last = q.index().index();
		}
		for (int64_t i = first; i <= last; i++) {
			if (!out->look())
				return too_large_read();
			sw_packets_bytes v = sw_counter_read(
				&sw_->pipeline, sw_->worker_count,
				counter.first, (uint32_t)i);
			auto *c = out->add()->mutable_counter_entry();
			c->set_counter_id(id);
			c->mutable_index()->set_index(i);
			c->mutable_data()->set_packet_count((int64_t)v.packets);
			c->mutable_data()->set_byte_count((int64_t)v.bytes);
		}
	}
	return Status::OK;
}

} // namespace p4rt_server
