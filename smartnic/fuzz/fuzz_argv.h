/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A command line from a fuzz input, for the option parsers' targets
 * (fuzz_nic_options.c, switch/fuzz/fuzz_switch_options.c): argv[0] is the
 * program, then one token per line of the input. Each token is a heap
 * block of its own, so that AddressSanitizer sees a read past its end.
 */
#ifndef JUMBOGATE_FUZZ_ARGV_H
#define JUMBOGATE_FUZZ_ARGV_H

#include <stddef.h>
#include <stdint.h>

/* More tokens than any parser takes: the rest is dropped. */
#define FUZZ_ARGV_MAX 256

struct fuzz_argv {
	int argc;
	/* What the parser is given, and may permute or overwrite (getopt
	 * does, and so does jumbogate-switch's parser); NULL after the last,
	 * as exec gives it. */
	char *argv[FUZZ_ARGV_MAX + 2];
	char *tokens[FUZZ_ARGV_MAX + 1]; /* the same, kept to be freed */
};

void fuzz_argv_split(struct fuzz_argv *args, const char *program,
		     const uint8_t *data, size_t size);
void fuzz_argv_free(struct fuzz_argv *args);

#endif
