/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: jumbogate-nic's options (app/options.c,
 * nic_options_parse): its command line and the config file it reads.
 *
 * Input: the lines before a line "%%" are the command line's tokens, one
 * per line after the program's name (fuzz_argv.h); the bytes after it
 * are a config file, and the token "@config" on the command line names
 * it (e.g. "--config", "@config"). The file is in memory (memfd), so no
 * input leaves a file behind. Checked besides the sanitizers: the
 * options it accepts are within the bounds the program relies on, and
 * every string it duplicated is freed (LeakSanitizer).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_argv.h"
#include "options.h"
#include "replay.h"

static const char config_token[] = "@config";
static struct fuzz_argv args;
static int config_fd = -1;
static char config_path[64];

static void fail(const char *what)
{
	fprintf(stderr, "accepted options %s\n", what);
	abort();
}

static bool ended(const char *text, size_t size)
{
	return memchr(text, '\0', size) != NULL;
}

static void check_accepted(const struct nic_options *options)
{
	if (options->eal_argc < 1 || options->eal_argc >= NIC_MAX_EAL_ARGS)
		fail("with an EAL argument count out of bounds");
	for (int i = 0; i < NIC_MAX_EAL_ARGS; i++)
		if ((i < options->eal_argc) != (options->eal_argv[i] != NULL))
			fail("with EAL arguments not ended by NULL");
	if (options->port_count > NIC_MAX_PORTS ||
	    options->return_port_count > NIC_MAX_PORTS ||
	    options->port_mtu_count > NIC_MAX_PORTS ||
	    options->internal_prefix_count > NIC_MAX_INTERNAL_PREFIXES ||
	    options->path_mtu_count > NIC_MAX_STARTUP_PATH_MTUS)
		fail("with more entries than their arrays hold");
	for (unsigned int i = 0; i < options->port_count; i++)
		if (!ended(options->ports[i], NIC_NAME_LEN) ||
		    options->ports[i][0] == '\0')
			fail("with a port name unended or empty");
	for (unsigned int i = 0; i < options->return_port_count; i++)
		if (!ended(options->return_ports[i].rx, NIC_NAME_LEN) ||
		    !ended(options->return_ports[i].tx, NIC_NAME_LEN))
			fail("with a return port name unended");
	for (unsigned int i = 0; i < options->port_mtu_count; i++)
		if (options->port_mtus[i].mtu < NIC_MIN_PORT_MTU ||
		    options->port_mtus[i].mtu > NIC_MAX_PORT_MTU)
			fail("with a port MTU out of bounds");
	if (!ended(options->grpc_address, NIC_NAME_LEN) ||
	    !ended(options->metrics_address, NIC_NAME_LEN))
		fail("with an address unended");
	if (options->smallest_port_mtu > options->largest_port_mtu ||
	    options->engine.internal_mtu > options->largest_port_mtu)
		fail("with MTUs out of order");
	if (options->burst < 1 || options->burst > 256)
		fail("with a burst out of bounds");
}

/* The config file's bytes in the memfd, its path in config_path. */
static void write_config(const uint8_t *bytes, size_t size)
{
	if (config_fd < 0) {
		config_fd = memfd_create("jumbogate-nic-fuzz.conf", 0);
		if (config_fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(config_path, sizeof(config_path), "/proc/self/fd/%d",
			 config_fd);
		/* A config file the input names may be any path: never one
		 * that waits for a terminal. */
		if (freopen("/dev/null", "r", stdin) == NULL)
			abort();
	}
	if (ftruncate(config_fd, 0) != 0 ||
	    (size > 0 && pwrite(config_fd, bytes, size, 0) != (ssize_t)size)) {
		perror(config_path);
		abort();
	}
}

/* The first line "%%", or NULL. */
static const uint8_t *find_separator(const uint8_t *data, size_t size)
{
	size_t start = 0;

	while (start < size) {
		const uint8_t *end = memchr(data + start, '\n', size - start);
		size_t length =
			end ? (size_t)(end - data) - start : size - start;

		if (length == 2 && memcmp(data + start, "%%", 2) == 0)
			return data + start;
		start += length + 1;
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nic_options options;
	const uint8_t *separator = find_separator(data, size);
	size_t command_line = separator ? (size_t)(separator - data) : size;
	const uint8_t *config = separator ? separator + 2 : data + size;

	if (config < data + size) /* the separator's own newline */
		config++;
	write_config(config, size - (size_t)(config - data));
	fuzz_argv_split(&args, "jumbogate-nic", data, command_line);
	for (int i = 1; i < args.argc; i++)
		if (strcmp(args.argv[i], config_token) == 0)
			args.argv[i] = config_path;
	if (nic_options_parse(&options, args.argc, args.argv) == NIC_PARSE_OK)
		check_accepted(&options);
	nic_options_free(&options);
	fuzz_argv_free(&args);
	return 0;
}

int fuzz_write_seeds(const char *dir)
{
	(void)dir;
	fprintf(stderr, "this target's seeds are the committed text files "
			"of corpus-nic-options/\n");
	return 1;
}
