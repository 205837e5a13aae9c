/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The match-action tables of the software switch, as the data path reads
 * them. The P4Runtime server (p4rt_server.cc) owns the entries as P4Runtime
 * messages and writes them here; workers only read.
 *
 * Three shapes cover every table of p4src/:
 *  - sw_hash: exact match on a fixed-length key (instances_v4/v6,
 *    merge_flows, next_hops' group id), open addressing;
 *  - sw_lpm: longest prefix match (routes_v4/v6, path_mtu_v4/v6), one hash
 *    probe per prefix length present, longest first, so a lookup costs as
 *    many probes as there are distinct lengths, not entries;
 *  - sw_ternary: ternary and range fields with priorities (merge_services),
 *    a list sorted by priority, as large as the P4 makes merge_services
 *    (P4_TABLE_MERGE_SERVICES_SIZE).
 *
 * Concurrency: the server changes tables only while holding the pipeline's
 * write lock; workers hold the read lock for a whole burst. The one field a
 * worker writes is an entry's last-hit time (idle timeouts), atomically.
 */
#ifndef JUMBOGATE_SWITCH_TABLES_H
#define JUMBOGATE_SWITCH_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest key of any exact table: merge_flows' ip_version (1 byte),
 * two 128-bit addresses, protocol and two ports, padded. */
#define SW_KEY_MAX 40

struct sw_hash_slot {
	uint8_t state; /* SW_SLOT_* */
	uint8_t key[SW_KEY_MAX];
	uint64_t value;
	/* Nanoseconds of the last packet that hit this entry; workers
	 * store it while the server reads it (sw_slot_last_hit). */
	uint64_t last_hit_ns;
};

/* GCC's atomic builtins, not C11 _Atomic: this header is shared with the
 * C++ server. */
static inline uint64_t sw_slot_last_hit(const struct sw_hash_slot *slot)
{
	return __atomic_load_n(&slot->last_hit_ns, __ATOMIC_RELAXED);
}

static inline void sw_slot_hit(struct sw_hash_slot *slot, uint64_t now_ns)
{
	__atomic_store_n(&slot->last_hit_ns, now_ns, __ATOMIC_RELAXED);
}

/* How long the entry has gone without a hit, as of now_ns. A worker may
 * stamp a hit later than a clock the caller read before (its burst began
 * after that): then it is 0, where a plain subtraction would wrap to
 * centuries and report a busy entry idle. */
static inline uint64_t sw_idle_ns(uint64_t last_hit_ns, uint64_t now_ns)
{
	return last_hit_ns >= now_ns ? 0 : now_ns - last_hit_ns;
}

struct sw_hash {
	struct sw_hash_slot *slots;
	uint32_t mask;	   /* slot count - 1 (a power of two) */
	uint32_t key_len;  /* bytes compared */
	uint32_t capacity; /* most live entries (the P4 table size) */
	uint32_t count;	   /* live entries */
	uint32_t tombstones;
	uint32_t seed;
};

/* CRC32-C of a byte string at any alignment. rte_hash_crc loads 8 and 4
 * bytes through pointer casts, undefined for the packed keys here (UBSan
 * reports it); memcpy loads compile to the same instructions. */
uint32_t sw_crc32c(const uint8_t *bytes, uint32_t length, uint32_t seed);

/* 0 on success, -ENOMEM. `capacity` entries fit; the slot array is at
 * least twice that, so probes stay short. */
int sw_hash_init(struct sw_hash *hash, uint32_t key_len, uint32_t capacity,
		 uint32_t seed);
void sw_hash_free(struct sw_hash *hash);
/* The live slot holding `key`, or NULL. */
struct sw_hash_slot *sw_hash_find(const struct sw_hash *hash,
				  const uint8_t *key);
/* Inserts or replaces. -ENOSPC when the table holds `capacity` entries and
 * the key is new. */
int sw_hash_put(struct sw_hash *hash, const uint8_t *key, uint64_t value,
		uint64_t now_ns);
/* 0, or -ENOENT. */
int sw_hash_remove(struct sw_hash *hash, const uint8_t *key);
void sw_hash_clear(struct sw_hash *hash);

/* Longest prefix match over addresses of up to 128 bits. */
#define SW_LPM_MAX_BITS 128
struct sw_lpm {
	struct sw_hash by_prefix; /* key: length byte + masked address */
	uint32_t addr_bytes;	  /* 4 or 16 */
	/* How many entries have each prefix length; lengths with entries are
	 * probed longest first. */
	uint32_t per_length[SW_LPM_MAX_BITS + 1];
	uint8_t lengths[SW_LPM_MAX_BITS + 1];
	uint32_t length_count;
};

int sw_lpm_init(struct sw_lpm *lpm, uint32_t addr_bytes, uint32_t capacity,
		uint32_t seed);
void sw_lpm_free(struct sw_lpm *lpm);
/* sw_lpm_lookup for a table of 4-byte (IPv4) or of 16-byte (IPv6)
 * addresses. */
bool sw_lpm_lookup_v4(const struct sw_lpm *lpm, const uint8_t *addr,
		      uint64_t *value);
bool sw_lpm_lookup_v6(const struct sw_lpm *lpm, const uint8_t *addr,
		      uint64_t *value);
/* The value of the longest prefix covering `addr`; false on a miss. Inline
 * for the table without entries (path_mtu's until a path is measured),
 * which costs a load. */
static inline bool sw_lpm_lookup(const struct sw_lpm *lpm, const uint8_t *addr,
				 uint64_t *value)
{
	if (lpm->length_count == 0)
		return false;
	return lpm->addr_bytes == 4 ? sw_lpm_lookup_v4(lpm, addr, value)
				    : sw_lpm_lookup_v6(lpm, addr, value);
}
/* -EINVAL for a prefix with host bits set or too long, -ENOSPC. */
int sw_lpm_put(struct sw_lpm *lpm, const uint8_t *addr, uint32_t length,
	       uint64_t value);
int sw_lpm_remove(struct sw_lpm *lpm, const uint8_t *addr, uint32_t length);
void sw_lpm_clear(struct sw_lpm *lpm);

/* merge_services: exact ip_version, ternary 128-bit dst_addr, range
 * dst_port, with a priority (higher wins, as in P4Runtime). */
struct sw_service_rule {
	uint8_t ip_version;
	uint8_t addr[16];
	uint8_t mask[16];
	uint16_t port_lo, port_hi;
	int32_t priority;
	uint64_t value;
};

struct sw_ternary {
	struct sw_service_rule *rules; /* sorted by priority, highest first */
	uint32_t count;
	uint32_t capacity;
};

int sw_ternary_init(struct sw_ternary *table, uint32_t capacity);
void sw_ternary_free(struct sw_ternary *table);
/* Replaces every rule (the server rebuilds this small table on each
 * change). -ENOSPC past the capacity. */
int sw_ternary_set(struct sw_ternary *table,
		   const struct sw_service_rule *rules, uint32_t count);
const struct sw_service_rule *sw_ternary_lookup(const struct sw_ternary *table,
						uint8_t ip_version,
						const uint8_t addr[16],
						uint16_t port);

/* Seed for table hashes, random per process so that nobody outside can
 * aim colliding keys at an entry. */
uint32_t sw_random_seed(void);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_SWITCH_TABLES_H */
