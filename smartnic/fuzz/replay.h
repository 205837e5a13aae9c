/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a fuzz target gives the shared replay driver (replay.c): its entry
 * point, and a writer of its seed corpus.
 */
#ifndef JUMBOGATE_FUZZ_REPLAY_H
#define JUMBOGATE_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* Input records are longer than any frame: a corpus file may hold many. */
#define FUZZ_INPUT_LIMIT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes the target's seed inputs into `dir`, which exists; 0, or 1 after
 * a message when a file could not be written. */
int fuzz_write_seeds(const char *dir);

/* A seed input being written: records appended, then saved. */
struct fuzz_seed {
	uint8_t bytes[FUZZ_INPUT_LIMIT];
	size_t size;
};

/* Appends one record as the targets read them: the target's header bytes
 * (its op, and for the engine a segmentation byte), the length in two
 * bytes, big-endian, and `length` bytes. */
void fuzz_seed_record(struct fuzz_seed *seed, const uint8_t *header,
		      size_t header_size, const uint8_t *bytes,
		      uint16_t length);

/* Writes the seed as dir/name and empties it; 0, or 1 after a message. */
int fuzz_seed_save(struct fuzz_seed *seed, const char *dir, const char *name);

#endif
