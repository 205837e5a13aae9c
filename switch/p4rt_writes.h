// SPDX-License-Identifier: Apache-2.0
//
// Which controller wrote to jumbogate-switch: the P4Runtime server records
// the election id of every accepted write, so that a fault test (or an
// operator after an incident) can check that no update came from a fenced
// controller. DPDK telemetry shows it as /jumbogate_switch/writes.
//
// The record is bounded: the kMaxElectionIds ids that wrote most recently
// each keep their own count; when another id writes, the least recent is
// summed into `older`. A fleet's controllers take a new election id at
// each election (docs/fleet.md), so 64 is many elections back.
#ifndef JUMBOGATE_SWITCH_P4RT_WRITES_H
#define JUMBOGATE_SWITCH_P4RT_WRITES_H

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include <rte_telemetry.h>

namespace p4rt_writes
{

// A P4Runtime election id (p4.v1.Uint128), ordered as the specification
// orders them.
struct ElectionId {
	uint64_t high = 0, low = 0;
	bool operator<(const ElectionId &o) const
	{
		return high != o.high ? high < o.high : low < o.low;
	}
	bool operator==(const ElectionId &o) const
	{
		return high == o.high && low == o.low;
	}
	// "HIGH:LOW" in decimal: in the fleet, the fencing epoch and the
	// etcd revision at which the leader won.
	std::string text() const
	{
		return std::to_string(high) + ":" + std::to_string(low);
	}
};

constexpr size_t kMaxElectionIds = 64;

class WriteRecord
{
      public:
	// `updates` of one Write were accepted under election id `id`.
	void add(const ElectionId &id, uint64_t updates)
	{
		if (updates == 0)
			return;
		std::lock_guard<std::mutex> lock(mu_);
		uint64_t now = unix_ns();
		auto found = index_.find(id);
		if (found != index_.end()) {
			recent_.splice(recent_.begin(), recent_, found->second);
		} else {
			recent_.push_front(Entry{id, 0, now, 0});
			index_[id] = recent_.begin();
			if (recent_.size() > kMaxElectionIds) {
				const Entry &last = recent_.back();
				older_ids_++;
				older_updates_ += last.updates;
				if (last.last_unix_ns > older_last_unix_ns_)
					older_last_unix_ns_ = last.last_unix_ns;
				index_.erase(last.id);
				recent_.pop_back();
			}
		}
		recent_.front().updates += updates;
		recent_.front().last_unix_ns = now;
	}

	// A dict: one entry "HIGH_LOW" per recent id (high, low, updates,
	// first_unix_ns, last_unix_ns), and "older" (ids, updates,
	// last_unix_ns). With first and last, a checker can tell that no id
	// wrote after a higher one had (the record is added to under the
	// server's lock, in the order writes were applied).
	void telemetry(rte_tel_data *d)
	{
		std::lock_guard<std::mutex> lock(mu_);
		rte_tel_data_start_dict(d);
		for (const Entry &e : recent_) {
			rte_tel_data *entry = rte_tel_data_alloc();
			if (entry == nullptr)
				return;
			rte_tel_data_start_dict(entry);
			rte_tel_data_add_dict_u64(entry, "high", e.id.high);
			rte_tel_data_add_dict_u64(entry, "low", e.id.low);
			rte_tel_data_add_dict_u64(entry, "updates", e.updates);
			rte_tel_data_add_dict_u64(entry, "first_unix_ns",
						  e.first_unix_ns);
			rte_tel_data_add_dict_u64(entry, "last_unix_ns",
						  e.last_unix_ns);
			// Telemetry names take letters, digits and '_'.
			char key[48];
			std::snprintf(key, sizeof(key), "%llu_%llu",
				      (unsigned long long)e.id.high,
				      (unsigned long long)e.id.low);
			rte_tel_data_add_dict_container(d, key, entry, 0);
		}
		rte_tel_data *older = rte_tel_data_alloc();
		if (older == nullptr)
			return;
		rte_tel_data_start_dict(older);
		rte_tel_data_add_dict_u64(older, "ids", older_ids_);
		rte_tel_data_add_dict_u64(older, "updates", older_updates_);
		rte_tel_data_add_dict_u64(older, "last_unix_ns",
					  older_last_unix_ns_);
		rte_tel_data_add_dict_container(d, "older", older, 0);
	}

      private:
	struct Entry {
		ElectionId id;
		uint64_t updates;
		uint64_t first_unix_ns; // since it last entered the record
		uint64_t last_unix_ns;
	};

	static uint64_t unix_ns()
	{
		timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		return (uint64_t)now.tv_sec * 1000000000ull +
		       (uint64_t)now.tv_nsec;
	}

	std::mutex mu_;
	std::list<Entry> recent_; // most recent first
	std::map<ElectionId, std::list<Entry>::iterator> index_;
	uint64_t older_ids_ = 0, older_updates_ = 0, older_last_unix_ns_ = 0;
};

} // namespace p4rt_writes

#endif
