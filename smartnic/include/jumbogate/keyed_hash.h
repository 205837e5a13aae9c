/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keyed hash of everything an outsider names: the engine's flow table
 * and the SmartNIC's path MTU tables, fragment groups and budgets.
 *
 * CRC32-C, even with a secret seed, is linear: which inputs collide does
 * not depend on the seed, so colliding keys for a chosen victim can be
 * solved offline. NH (the inner hash of UMAC: products of key-offset
 * 32-bit words) is 2^-32-almost-universal, so without the key a collision
 * costs about 2^32 guesses; a murmur finaliser then spreads its bits so
 * that any slice of the result serves as an index.
 */
#ifndef JUMBOGATE_KEYED_HASH_H
#define JUMBOGATE_KEYED_HASH_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>

/* Finaliser of MurmurHash3: every input bit reaches every output bit. */
static inline uint64_t jg_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* NH over an even number of 32-bit words, with a key at least as long. */
static inline uint64_t jg_nh(const uint32_t *words, const uint32_t *key,
			     uint32_t count)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < count; i += 2)
		sum += (uint64_t)(uint32_t)(words[i] + key[i]) *
		       (uint32_t)(words[i + 1] + key[i + 1]);
	return sum;
}

/* The keyed hash of count words (even): NH, the length, the finaliser. */
static inline uint64_t jg_keyed_hash(const uint32_t *words, const uint32_t *key,
				     uint32_t count)
{
	return jg_mix64(jg_nh(words, key, count) ^ count);
}

/* Fill a key of count words: from seed when it is not 0 (tests that want
 * the same placement every run), else from the kernel's random source.
 * 0, or -EIO when the kernel gave too few bytes. */
static inline int jg_keyed_hash_key(uint32_t *key, size_t count, uint64_t seed)
{
	if (seed != 0) {
		uint64_t state = seed;

		for (size_t i = 0; i < count; i++) {
			/* splitmix64 */
			uint64_t z = (state += 0x9e3779b97f4a7c15ull);

			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			key[i] = (uint32_t)(z ^ (z >> 31));
		}
		return 0;
	}
	return getrandom(key, count * sizeof(*key), 0) ==
			       (ssize_t)(count * sizeof(*key))
		       ? 0
		       : -EIO;
}

#endif /* JUMBOGATE_KEYED_HASH_H */
