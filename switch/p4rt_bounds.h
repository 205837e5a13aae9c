// SPDX-License-Identifier: Apache-2.0
//
// The bounds the P4Runtime server of jumbogate-switch holds every client
// to, primary or not: what one client may make the switch hold or do, so
// that no write, stream or digest config can exhaust its memory or stall
// forwarding. docs/switch.md ("Bounds") lists each with what happens
// beyond it.
#ifndef JUMBOGATE_SWITCH_P4RT_BOUNDS_H
#define JUMBOGATE_SWITCH_P4RT_BOUNDS_H

#include <cstddef>
#include <cstdint>
#include <string>

#include <rte_pause.h>
#include <rte_rwlock.h>

#include "switch.h"

namespace p4rt_bounds
{

// Updates in one WriteRequest. The server's lock is held for a whole batch
// (arbitration, reads and digests wait for it), so a batch must end. Every
// table of the program full, with the profile's members, is about 63,000
// entries: the largest batch a controller needs fits.
constexpr int kMaxUpdatesPerBatch = 100000;

// An ECMP group's weights expand into one next hop per unit of weight in
// the data path (pipeline.c picks hash % size, as BMv2 does), so the sum of
// a group's weights is what it costs. Where the P4Info gives no
// max_group_size (v1model's selector has none) the group is held to the
// profile's size, and each member to a weight that keeps the shares
// meaningful without letting one member fill a group.
constexpr int32_t kMaxMemberWeight = 256;

// Streams arbitrated for one role. Each holds a writer thread and an
// outbox; beyond, arbitration is RESOURCE_EXHAUSTED (the specification's
// "Rules for Handling MasterArbitrationUpdate Messages").
constexpr size_t kMaxStreamsPerRole = 64;

// Named roles (p4rt_roles.h): each holds a config and a primary, and any
// client may name one, so at most kMaxRoles exist at once (the default role
// aside); beyond, arbitration for a new one is RESOURCE_EXHAUSTED and
// counted (roles_refused). A role is forgotten when its last stream ends.
// A role's name is kept with every stream of it: at most kMaxRoleName
// bytes, beyond INVALID_ARGUMENT.
constexpr size_t kMaxRoles = 16;
constexpr size_t kMaxRoleName = 128;

// StreamChannel calls open at once, arbitrated or not: each holds one of
// the gRPC server's threads for as long as the client keeps it open, so
// streams that never arbitrate could take every thread. A role's 64 and as
// many more; beyond, the oldest stream that has not arbitrated is closed
// (below), or when every one has, the newest is closed with
// RESOURCE_EXHAUSTED (streams_refused).
constexpr size_t kMaxStreams = 2 * kMaxStreamsPerRole;

// A stream's first message is its arbitration, sent as it opens: a stream
// that has not arbitrated after kArbitrationDeadlineNs is closed
// (cancelled) and counted (streams_unarbitrated_closed). 5 s is far more
// than a round trip to a loaded controller, and short enough that streams
// opened and left idle cannot keep the controller out: 128 of them held
// every slot for as long as their client liked. At most
// kMaxUnarbitratedStreams streams wait for their arbitration at once (a
// role's 64): a stream past it, or past kMaxStreams while any waits, closes
// the oldest that waits, counted the same way: streams that never
// arbitrate take at most half the slots, and a new stream that arbitrates
// at once gets in unless arbitrated streams hold every slot.
constexpr uint64_t kArbitrationDeadlineNs = 5 * 1000 * 1000 * 1000ULL;
constexpr size_t kMaxUnarbitratedStreams = kMaxStreamsPerRole;

// The bytes a stream's outbox holds (message.ByteSizeLong()), beside its
// 1024 messages (p4rt_server.h, kStreamOutbox): an idle-timeout
// notification carries every idle merge_flows entry (16,384 of 83 bytes,
// 1.4 MB) and was queued every 50 ms, so a primary that stopped reading
// made the switch grow by 150 MB a second (6.5 GB after 40 s). 16 MiB holds
// a dozen of the largest notifications, over 200 digest lists of 1,024
// digests (about 70 KB each) or all 1,024 packet-ins of 9.6 KB frames, so
// a controller that falls behind for a moment loses nothing. The switch
// sends what it makes itself only to primaries (one a role); 128 streams at
// the bound, each filled by its own client's packet-outs echoed in stream
// errors, hold 2 GiB. Past it the new message is dropped and counted
// (stream_messages_dropped; stream_outbox_bytes is what all hold now).
constexpr size_t kMaxStreamOutboxBytes = 16 * 1024 * 1024;

// Entities one Read may look at: those it answers and those its filters
// pass over (a wildcard with a priority or action filter walks the table),
// and entities one ReadRequest may name. A Read builds its whole answer
// under the server's lock before it sends any: 20,000 wildcard counter
// entities (an 80 KB request) expanded to 25.7 M entities, took the switch
// from 94 MB to 4.4 GB and held a primary's Write for 15.7 s. Every table,
// counter, meter, action profile member and group, multicast group and
// clone session of the program full is about 68,000 entities (61,957 table
// entries, 1,286 counter and 768 meter cells, 2 x 1,024 members and
// groups, 2 x 1,024 replication entries): 140,000 reads all of it twice in
// one request, and holds an answer of some tens of MB. Beyond, the Read is
// RESOURCE_EXHAUSTED at once, nothing sent, and counted (reads_refused).
constexpr size_t kMaxReadEntities = 140000;

// The elephant digest's config: a list is sent when it holds
// max_list_size digests or its oldest has waited max_timeout_ns, so both
// bound what the server holds; 0 for max_list_size (no limit in the
// specification) means kMaxDigestListSize here.
constexpr int64_t kMaxDigestTimeoutNs = 10 * 1000 * 1000 * 1000LL;
constexpr int32_t kMaxDigestListSize = 1024;

// Multicast groups and clone sessions (p4rt_pre.h) held at once. Their ids
// are any uint32 and each holds up to 1024 replicas, so without a count a
// client made entries until memory ran out (15,000 groups of 1,024
// replicas took the switch to 2.9 GB). The software pipeline replicates
// nothing; the entries are kept for a controller that programs the Tofino
// top, which gives each port one mirror session (p4src/tna/signal.p4:
// 512 + port on Tofino 1, whose session ids are 10 bits, so 1024 sessions
// in all) and calls no multicast: 1024 of each is every session the
// hardware numbers, and a group per port twice over. At the bounds, with
// 1024 replicas each, the switch holds about 380 MB more (a replica kept
// as protobuf is about 185 bytes). Beyond, an INSERT is RESOURCE_EXHAUSTED
// and counted (multicast_groups_refused, clone_sessions_refused).
constexpr size_t kMaxMulticastGroups = 1024;
constexpr size_t kMaxCloneSessions = 1024;

// Replicas of every multicast group and clone session together: the
// counts above, with 1,024 replicas each, would let a client make the
// switch hold about 380 MB (2 x 1,024 x 1,024 replicas). The Tofino top
// needs one replica per mirror session, its port: 1,024 in all. 16,384 is
// sixteen times that (16 replicas for every session the hardware numbers,
// or sixteen full groups), about 3 MB as protobuf. Beyond, the INSERT or
// MODIFY that would pass it is RESOURCE_EXHAUSTED and counted
// (replicas_refused).
constexpr size_t kMaxReplicasTotal = 16384;

// Opaque bytes a client keeps with an entry and reads back: a table
// entry's metadata, a multicast group's. A controller keeps a tag there
// (an owner, a revision, a cookie or a hash of its intent: tens of
// bytes); unbounded, 16 table entries of 48 MB each took the switch from
// 94 MB to 885 MB. At 1 KiB, every table of the program full (about
// 62,000 entries) holds at most about 60 MB of it. Beyond, the update is
// INVALID_ARGUMENT. (controller_metadata is a uint64.) Unknown fields, the
// other opaque bytes a client could send, are not kept.
constexpr size_t kMaxEntryMetadata = 1024;
inline std::string metadata_too_long(size_t size)
{
	return "metadata of " + std::to_string(size) +
	       " bytes: this switch keeps at most " +
	       std::to_string(kMaxEntryMetadata);
}

// The data path's lock is held for at most this long at a stretch while a
// batch is written: between two updates the workers get their turn (the
// specification's "Batch Atomicity": with CONTINUE_ON_ERROR packets may
// see every state between two updates). 200 us is about 100 frames of a
// veth port at the 0.48 Mpps it carries.
constexpr uint64_t kWriteLockSliceNs = 200 * 1000;

// Holds the pipeline's write lock over a batch, and lets the workers in
// between updates once it has been held for kWriteLockSliceNs.
// rte_rwlock prefers writers: a worker waiting for the read lock gets in
// only if the writer does not take the lock straight back, so the writer
// waits until a reader has it (or none came within a few microseconds).
class DataPlaneWriter
{
      public:
	explicit DataPlaneWriter(rte_rwlock_t *lock) : lock_(lock)
	{
		rte_rwlock_write_lock(lock_);
		since_ = sw_now_ns();
	}
	~DataPlaneWriter()
	{
		rte_rwlock_write_unlock(lock_);
	}
	DataPlaneWriter(const DataPlaneWriter &) = delete;
	DataPlaneWriter &operator=(const DataPlaneWriter &) = delete;

	// Between two updates.
	void pause_if_due()
	{
		uint64_t now = sw_now_ns();
		if (now - since_ < kWriteLockSliceNs)
			return;
		rte_rwlock_write_unlock(lock_);
		while (__atomic_load_n(&lock_->cnt, __ATOMIC_RELAXED) <
			       RTE_RWLOCK_READ &&
		       sw_now_ns() - now < 5000)
			rte_pause();
		rte_rwlock_write_lock(lock_);
		since_ = sw_now_ns();
		pauses_++;
	}

	uint64_t pauses() const
	{
		return pauses_;
	}

	// Runs work with the lock let go, for work that reads only the
	// server's own state (under its mutex, held throughout) and writes
	// nothing the workers read: the hop sets of next_hops, built in full
	// before they are swapped in under the lock, take milliseconds at
	// the largest selector (a million hops), and forwarding stopped for
	// all of them.
	//
	// The lock is taken back however work ends: an exception thrown
	// from it (std::bad_alloc) used to leave the lock let go, and the
	// destructor let it go once more, so the workers' read lock spun
	// for ever and forwarding stopped.
	template <typename Work> auto without_lock(Work &&work)
	{
		struct Relock {
			DataPlaneWriter *writer;
			~Relock()
			{
				rte_rwlock_write_lock(writer->lock_);
				writer->since_ = sw_now_ns();
			}
		};
		rte_rwlock_write_unlock(lock_);
		Relock relock{this};
		return work();
	}

      private:
	rte_rwlock_t *lock_;
	uint64_t since_ = 0;
	uint64_t pauses_ = 0;
};

} // namespace p4rt_bounds

#endif
