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

/* Writes the target's seed inputs into `dir` (created if missing);
 * 0, or 1 after a message when a file could not be written. */
int fuzz_write_seeds(const char *dir);

/* Writes `size` bytes as dir/name; 0, or 1 after a message. */
int fuzz_save_seed(const char *dir, const char *name, const uint8_t *bytes,
		   size_t size);

#endif
