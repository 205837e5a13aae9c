/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: jumbogate-switch's command line (options.c,
 * sw_parse_options), fed argv built from the input: one token per line
 * (smartnic/fuzz/fuzz_argv.h). The parser runs once per input in the
 * same process, so state it keeps between calls (getopt's) is fuzzed
 * too. Checked besides the sanitizers: options it accepts are ones the
 * program can run with, and a good command line parsed after any input is
 * still accepted (getopt runs in libc, which the sanitizers do not see
 * read a freed token).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_argv.h"
#include "options.h"
#include "replay.h"

static struct fuzz_argv args;

static void fail(const char *what)
{
	fprintf(stderr, "accepted options %s\n", what);
	abort();
}

static void check_accepted(const struct options *options)
{
	if (options->eal_argc < 1 || options->eal_argc > MAX_EAL_ARGS)
		fail("with an EAL argument count out of bounds");
	if (options->port_count < 1 || options->port_count > SW_MAX_DPDK_PORTS)
		fail("with a port count out of bounds");
	for (unsigned int i = 0; i < options->port_count; i++) {
		const struct port_option *port = &options->ports[i];

		if (memchr(port->name, '\0', sizeof(port->name)) == NULL ||
		    port->name[0] == '\0')
			fail("with a port name unended or empty");
		if (port->p4_port >= SW_PORTS - 1 ||
		    port->p4_port == options->cpu_port)
			fail("with a P4 port the switch cannot have");
		for (unsigned int j = 0; j < i; j++)
			if (options->ports[j].p4_port == port->p4_port)
				fail("with a P4 port given twice");
	}
	if (options->depth != 256 && options->depth != 512)
		fail("with a depth not compiled");
	if (options->burst < 1 || options->burst > MAX_BURST)
		fail("with a burst out of bounds");
	if (options->port_mtu < 576 || options->port_mtu > 9600)
		fail("with a port MTU out of bounds");
	if (options->grpc == NULL)
		fail("without a gRPC address");
}

/* A command line the parser accepts, parsed after each input: what an
 * input leaves behind in the parser's state (getopt's) must not change
 * how the next command line is read. */
static void check_fresh(void)
{
	static const char known_good[] = "--\n--port\n1=net_null0";
	struct options options;

	fuzz_argv_split(&args, PROGRAM, (const uint8_t *)known_good,
			sizeof(known_good) - 1);
	if (sw_parse_options(&options, args.argc, args.argv) != 0 ||
	    options.port_count != 1) {
		fprintf(stderr, "after the input, a good command line is "
				"refused\n");
		abort();
	}
	fuzz_argv_free(&args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct options options;

	fuzz_argv_split(&args, PROGRAM, data, size);
	if (sw_parse_options(&options, args.argc, args.argv) == 0)
		check_accepted(&options);
	fuzz_argv_free(&args);
	check_fresh();
	return 0;
}

int fuzz_write_seeds(const char *dir)
{
	(void)dir;
	fprintf(stderr, "this target's seeds are the committed text files "
			"of corpus-options/\n");
	return 1;
}
