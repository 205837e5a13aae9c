/* SPDX-License-Identifier: Apache-2.0 */
#include "options.h"
#include "option_table.h"

#include <rte_mbuf.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a value came from, for messages that say where to look. */
struct origin {
	const char *file; /* NULL for the command line */
	unsigned int line;
};

static void report(const struct origin *origin, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void report(const struct origin *origin, const char *format, ...)
{
	va_list args;

	if (origin->file)
		fprintf(stderr, "jumbogate-nic: %s:%u: ", origin->file,
			origin->line);
	else
		fprintf(stderr, "jumbogate-nic: ");
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fputc('\n', stderr);
}

static bool parse_unsigned(const char *name, const char *value, uint64_t min,
			   uint64_t max, uint64_t *out,
			   const struct origin *origin)
{
	char *end;
	unsigned long long number;

	errno = 0;
	number = strtoull(value, &end, 10);
	/* Digits only: strtoull would skip blanks and take a sign after
	 * them (" -1" as 2^64 - 1). */
	if (!isdigit((unsigned char)value[0]) || *end != '\0' || errno != 0 ||
	    number < min || number > max) {
		report(origin, "--%s '%s': expected a whole number %llu..%llu",
		       name, value, (unsigned long long)min,
		       (unsigned long long)max);
		return false;
	}
	*out = number;
	return true;
}

static bool parse_double(const char *name, const char *value, double min,
			 double max, bool min_exclusive, bool max_exclusive,
			 double *out, const struct origin *origin)
{
	char *end;
	double number;

	errno = 0;
	number = strtod(value, &end);
	if (*value == '\0' || *end != '\0' || errno != 0 || number != number ||
	    number < min || number > max || (min_exclusive && number == min) ||
	    (max_exclusive && number == max)) {
		report(origin, "--%s '%s': expected a number in %s%g, %g%s",
		       name, value, min_exclusive ? "(" : "[", min, max,
		       max_exclusive ? ")" : "]");
		return false;
	}
	*out = number;
	return true;
}

static bool parse_switch(const char *name, const char *value, bool *out,
			 const struct origin *origin)
{
	if (!strcmp(value, "on") || !strcmp(value, "true") ||
	    !strcmp(value, "yes") || !strcmp(value, "1")) {
		*out = true;
		return true;
	}
	if (!strcmp(value, "off") || !strcmp(value, "false") ||
	    !strcmp(value, "no") || !strcmp(value, "0")) {
		*out = false;
		return true;
	}
	report(origin, "--%s '%s': expected on or off", name, value);
	return false;
}

static bool copy_name(const char *name, const char *value, char *out,
		      const struct origin *origin)
{
	if (*value == '\0' || strlen(value) >= NIC_NAME_LEN) {
		report(origin, "--%s: '%s' must be 1..%d characters", name,
		       value, NIC_NAME_LEN - 1);
		return false;
	}
	strcpy(out, value);
	return true;
}

/* Split a string on blanks into EAL arguments (no quoting: EAL values
 * never contain blanks). */
static bool set_eal_arguments(struct nic_options *options, const char *text,
			      const struct origin *origin)
{
	char *copy = strdup(text);
	char *save = NULL;

	if (copy == NULL)
		return false;
	/* Emptied, not only freed: fewer arguments than before would leave
	 * freed strings after the last, where argv's convention has NULL. */
	for (int i = 1; i < options->eal_argc; i++) {
		free(options->eal_argv[i]);
		options->eal_argv[i] = NULL;
	}
	options->eal_argc = 1;
	for (char *word = strtok_r(copy, " \t", &save); word;
	     word = strtok_r(NULL, " \t", &save)) {
		if (options->eal_argc >= NIC_MAX_EAL_ARGS - 1) {
			report(origin, "--eal: more than %d arguments",
			       NIC_MAX_EAL_ARGS - 2);
			free(copy);
			return false;
		}
		options->eal_argv[options->eal_argc++] = strdup(word);
	}
	free(copy);
	return true;
}

static char *trim(char *text)
{
	char *end;

	while (isspace((unsigned char)*text))
		text++;
	end = text + strlen(text);
	while (end > text && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return text;
}

/* --port-mtu BYTES sets every port's MTU; --port-mtu NAME=BYTES one
 * port's (a DPDK device name, checked against the served ports once they
 * are known, ports.c, where two names of one device are caught too). */
static bool parse_port_mtu(struct nic_options *options, const char *value,
			   const struct origin *origin)
{
	/* A name, '=' and a number; spaces around either are dropped, as a
	 * config file's "port-mtu = a = 1500" has them. */
	char text[NIC_NAME_LEN + 16], *equals, *name;
	struct nic_port_mtu *own;
	uint64_t number;

	if (strchr(value, '=') == NULL) {
		if (!parse_unsigned("port-mtu", value, NIC_MIN_PORT_MTU,
				    NIC_MAX_PORT_MTU, &number, origin))
			return false;
		options->port_mtu = (uint32_t)number;
		return true;
	}
	if (strlen(value) >= sizeof(text)) {
		report(origin, "--port-mtu '%s': too long for PORT=BYTES",
		       value);
		return false;
	}
	strcpy(text, value);
	equals = strchr(text, '=');
	*equals = '\0';
	name = trim(text);
	if (*name == '\0' || strlen(name) >= NIC_NAME_LEN) {
		report(origin,
		       "--port-mtu '%s': expected BYTES or PORT=BYTES (a port "
		       "name of 1..%d characters), e.g. net_af_xdp0=1500",
		       value, NIC_NAME_LEN - 1);
		return false;
	}
	if (!parse_unsigned("port-mtu", trim(equals + 1), NIC_MIN_PORT_MTU,
			    NIC_MAX_PORT_MTU, &number, origin))
		return false;
	for (unsigned int i = 0; i < options->port_mtu_count; i++)
		if (strcmp(options->port_mtus[i].port, name) == 0) {
			report(origin, "--port-mtu: port '%s' is given twice",
			       name);
			return false;
		}
	if (options->port_mtu_count >= NIC_MAX_PORTS) {
		report(origin, "--port-mtu: at most %d ports of their own",
		       NIC_MAX_PORTS);
		return false;
	}
	own = &options->port_mtus[options->port_mtu_count++];
	snprintf(own->port, sizeof(own->port), "%s", name);
	own->mtu = (uint32_t)number;
	return true;
}

static enum nic_parse_result read_config(struct nic_options *options,
					 const char *path, unsigned int depth);

static enum nic_parse_result
apply(struct nic_options *options, const struct option_spec *spec,
      const char *value, const struct origin *origin, unsigned int depth)
{
	struct jg_engine_config *engine = &options->engine;
	char error[NIC_ERROR_LEN];
	const char *name = spec->name;
	uint64_t number = 0;
	bool ok = true;

	switch (spec->id) {
	case OPT_HELP:
	case OPT_VERSION:
		/* Handled before anything else is parsed. */
		break;
	case OPT_CONFIG:
		return read_config(options, value, depth + 1);
	case OPT_EAL:
		ok = set_eal_arguments(options, value, origin);
		break;
	case OPT_PORT:
		if (options->port_count >= NIC_MAX_PORTS) {
			report(origin, "--port: at most %d ports",
			       NIC_MAX_PORTS);
			return NIC_PARSE_ERROR;
		}
		ok = copy_name(name, value, options->ports[options->port_count],
			       origin);
		if (ok)
			options->port_count++;
		break;
	case OPT_RETURN_PORT: {
		const char *equals = strchr(value, '=');
		struct nic_return_port *pair;

		if (options->return_port_count >= NIC_MAX_PORTS) {
			report(origin, "--return-port: at most %d pairs",
			       NIC_MAX_PORTS);
			return NIC_PARSE_ERROR;
		}
		if (equals == NULL || equals == value || equals[1] == '\0' ||
		    (size_t)(equals - value) >= NIC_NAME_LEN ||
		    strlen(equals + 1) >= NIC_NAME_LEN) {
			report(origin,
			       "--return-port '%s': expected RX=TX, e.g. "
			       "net_af_packet0=net_af_packet1",
			       value);
			return NIC_PARSE_ERROR;
		}
		pair = &options->return_ports[options->return_port_count++];
		memcpy(pair->rx, value, equals - value);
		pair->rx[equals - value] = '\0';
		strcpy(pair->tx, equals + 1);
		break;
	}
	case OPT_PORT_MTU:
		ok = parse_port_mtu(options, value, origin);
		break;
	case OPT_MBUFS:
		ok = parse_unsigned(name, value, 1024, 1u << 20, &number,
				    origin);
		options->mbufs_per_port = (uint32_t)number;
		break;
	case OPT_MBUF_SIZE:
		ok = parse_unsigned(name, value, 2048,
				    UINT16_MAX - RTE_PKTMBUF_HEADROOM, &number,
				    origin);
		options->mbuf_size = (uint32_t)number;
		break;
	case OPT_BURST:
		ok = parse_unsigned(name, value, 1, 256, &number, origin);
		options->burst = (uint16_t)number;
		break;
	case OPT_IDLE_SLEEP:
		ok = parse_unsigned(name, value, 0, 100000, &number, origin);
		options->idle_sleep_max_us = (uint32_t)number;
		break;
	case OPT_MAX_ONLOADED:
		ok = parse_unsigned(name, value, 1, NIC_MAX_MAX_FLOWS, &number,
				    origin);
		options->engine.max_onloaded_flows = (uint32_t)number;
		break;
	case OPT_ONLOAD_IDLE:
		ok = parse_unsigned(name, value, 1, 86400, &number, origin);
		options->engine.onload_idle_s = (uint32_t)number;
		break;
	case OPT_COMMAND_TIMEOUT:
		ok = parse_unsigned(name, value, 0, 60000, &number, origin);
		options->command_timeout_ms = (uint32_t)number;
		break;
	case OPT_QUEUES:
		ok = parse_unsigned(name, value, 1, NIC_MAX_QUEUES, &number,
				    origin);
		options->queues = (uint16_t)number;
		break;
	case OPT_QUEUE_SCALING:
		ok = parse_switch(name, value, &options->queue_scaling, origin);
		break;
	case OPT_QUEUE_SCALE_PPS:
		ok = parse_unsigned(name, value, 1, 1000000000, &number,
				    origin);
		options->queue_scale_pps = (uint32_t)number;
		break;
	case OPT_QUEUE_SCALE_ELEPHANTS:
		ok = parse_unsigned(name, value, 1, 1000000, &number, origin);
		options->queue_scale_elephants = (uint32_t)number;
		break;
	case OPT_QUEUE_SCALE_DOWN:
		ok = parse_unsigned(name, value, 1, 3600, &number, origin);
		options->queue_scale_down_s = (uint32_t)number;
		break;
	case OPT_GRPC:
		ok = copy_name(name, value, options->grpc_address, origin);
		break;
	case OPT_METRICS:
		ok = copy_name(name, value, options->metrics_address, origin);
		break;
	case OPT_TLS_CERT:
	case OPT_TLS_KEY:
	case OPT_TLS_CLIENT_CA:
	case OPT_TLS_ALLOW:
	case OPT_TLS_RELOAD:
	case OPT_INSECURE:
		if (!jg_tls_option(&options->tls, name,
				   spec->argument ? value : NULL, error,
				   sizeof(error))) {
			report(origin, "%s", error);
			return NIC_PARSE_ERROR;
		}
		break;
	case OPT_INTERNAL_PREFIX:
		if (options->internal_prefix_count >=
		    NIC_MAX_INTERNAL_PREFIXES) {
			report(origin, "--internal-prefix: at most %d",
			       NIC_MAX_INTERNAL_PREFIXES);
			return NIC_PARSE_ERROR;
		}
		if (!nic_prefix_parse(value,
				      &options->internal_prefixes
					       [options->internal_prefix_count],
				      error, sizeof(error))) {
			report(origin, "--internal-prefix: %s", error);
			return NIC_PARSE_ERROR;
		}
		options->internal_prefix_count++;
		break;
	case OPT_INTERNAL_MTU:
		ok = parse_unsigned(name, value, NIC_MIN_INTERNAL_MTU,
				    NIC_MAX_PORT_MTU, &number, origin);
		engine->internal_mtu = (uint32_t)number;
		break;
	case OPT_DEFAULT_PATH_MTU_V4:
		ok = parse_unsigned(name, value, JG_MIN_PATH_MTU_V4,
				    NIC_MAX_PORT_MTU, &number, origin);
		engine->default_path_mtu_v4 = (uint16_t)number;
		break;
	case OPT_DEFAULT_PATH_MTU_V6:
		ok = parse_unsigned(name, value, JG_MIN_PATH_MTU_V6,
				    NIC_MAX_PORT_MTU, &number, origin);
		engine->default_path_mtu_v6 = (uint16_t)number;
		break;
	case OPT_PATH_MTU: {
		char prefix_text[NIC_PREFIX_TEXT_LEN];
		const char *equals = strchr(value, '=');
		struct nic_startup_path_mtu *entry;

		if (options->path_mtu_count >= NIC_MAX_STARTUP_PATH_MTUS) {
			report(origin, "--path-mtu: at most %d",
			       NIC_MAX_STARTUP_PATH_MTUS);
			return NIC_PARSE_ERROR;
		}
		if (equals == NULL ||
		    (size_t)(equals - value) >= sizeof(prefix_text)) {
			report(origin,
			       "--path-mtu '%s': expected CIDR=BYTES, e.g. "
			       "198.51.100.0/24=1400",
			       value);
			return NIC_PARSE_ERROR;
		}
		entry = &options->path_mtus[options->path_mtu_count];
		memcpy(prefix_text, value, equals - value);
		prefix_text[equals - value] = '\0';
		if (!nic_prefix_parse(prefix_text, &entry->prefix, error,
				      sizeof(error))) {
			report(origin, "--path-mtu: %s", error);
			return NIC_PARSE_ERROR;
		}
		if (entry->prefix.depth == 0) {
			report(origin,
			       "--path-mtu '%s': a /0 prefix is the default; "
			       "use --default-path-mtu-v4 or -v6",
			       value);
			return NIC_PARSE_ERROR;
		}
		ok = parse_unsigned(name, equals + 1, NIC_MIN_PATH_MTU,
				    NIC_MAX_PORT_MTU, &number, origin);
		entry->mtu = (uint16_t)number;
		if (ok)
			options->path_mtu_count++;
		break;
	}
	case OPT_MAX_FLOWS:
		ok = parse_unsigned(name, value, NIC_MIN_MAX_FLOWS,
				    NIC_MAX_MAX_FLOWS, &number, origin);
		engine->max_flows = (uint32_t)number;
		break;
	case OPT_MAX_SEGMENTS:
		ok = parse_unsigned(name, value, NIC_MIN_MAX_SEGMENTS,
				    NIC_MAX_MAX_SEGMENTS, &number, origin);
		engine->max_chain_segments = (uint16_t)number;
		break;
	case OPT_MERGE_UNKNOWN:
		ok = parse_switch(name, value, &engine->merge_unknown_flows,
				  origin);
		break;
	case OPT_DELAY_RATE:
		ok = parse_double(name, value, 0, 10000, false, false,
				  &engine->delay.rate_threshold_gbps, origin);
		break;
	case OPT_DELAY_YIELD:
		ok = parse_double(name, value, 0, 1, false, false,
				  &engine->delay.yield_threshold, origin);
		break;
	case OPT_DELAY_QUANTILE:
		ok = parse_double(name, value, 0, 1, true, true,
				  &engine->delay.quantile, origin);
		break;
	case OPT_DELAY_MAX:
		ok = parse_unsigned(name, value, 0, NIC_MAX_DELAY_US, &number,
				    origin);
		engine->delay.max_delay_us = (uint32_t)number;
		break;
	case OPT_RAISE_SYN_MSS:
		ok = parse_switch(name, value, &engine->raise_syn_mss, origin);
		break;
	case OPT_CARAVAN_PACK:
		ok = parse_switch(name, value, &options->caravan_pack, origin);
		break;
	case OPT_CARAVAN_DSCP:
		ok = parse_unsigned(name, value, 1, 63, &number, origin);
		engine->caravan_dscp = (uint8_t)number;
		break;
	case OPT_PMTU_DISCOVERY:
		ok = parse_switch(name, value, &options->pmtu_discovery,
				  origin);
		break;
	case OPT_PMTU_PORT:
		ok = parse_unsigned(name, value, 1, 65535, &number, origin);
		options->pmtu.port = (uint16_t)number;
		break;
	case OPT_PMTU_PROBE_MTU:
		ok = parse_unsigned(name, value, NIC_MIN_PORT_MTU,
				    NIC_MAX_PORT_MTU, &number, origin);
		options->pmtu.probe_mtu = (uint16_t)number;
		break;
	case OPT_PMTU_DESTINATIONS:
		ok = parse_unsigned(name, value, 64, 1u << 20, &number, origin);
		options->pmtu.capacity = (uint32_t)number;
		break;
	case OPT_PMTU_REPROBE:
		ok = parse_unsigned(name, value, 1, 86400, &number, origin);
		options->pmtu.reprobe_s = (uint32_t)number;
		break;
	case OPT_PMTU_TIMEOUT:
		ok = parse_unsigned(name, value, 10, 60000, &number, origin);
		options->pmtu.timeout_ms = (uint32_t)number;
		break;
	case OPT_PMTU_REPLIES:
		ok = parse_unsigned(name, value, 1, 1000000, &number, origin);
		options->pmtu.replies_per_s = (uint32_t)number;
		break;
	case OPT_PMTU_ROUNDS:
		ok = parse_unsigned(name, value, 1, 100000, &number, origin);
		options->pmtu.rounds_per_s = (uint32_t)number;
		break;
	case OPT_PMTU_ICMP_GAP:
		ok = parse_unsigned(name, value, 1, 86400, &number, origin);
		options->pmtu.icmp_gap_s = (uint32_t)number;
		break;
	case OPT_PMTU_PREFIX_ROUNDS:
		ok = parse_unsigned(name, value, 1, 100000, &number, origin);
		options->pmtu.prefix_rounds_per_min = (uint32_t)number;
		break;
	}
	return ok ? NIC_PARSE_OK : NIC_PARSE_ERROR;
}

/* "key = value" lines; '#' starts a comment; blank lines are ignored.
 * A value may be quoted with double quotes (for the eal key). */
static enum nic_parse_result read_config(struct nic_options *options,
					 const char *path, unsigned int depth)
{
	struct origin origin = {.file = path, .line = 0};
	enum nic_parse_result result = NIC_PARSE_OK;
	char line[1024];
	FILE *file;

	if (depth > 4) {
		fprintf(stderr,
			"jumbogate-nic: %s: config files include each other "
			"too deeply\n",
			path);
		return NIC_PARSE_ERROR;
	}
	file = fopen(path, "r");
	if (file == NULL) {
		fprintf(stderr,
			"jumbogate-nic: cannot read config file %s: %s\n", path,
			strerror(errno));
		return NIC_PARSE_ERROR;
	}
	while (result == NIC_PARSE_OK && fgets(line, sizeof(line), file)) {
		const struct option_spec *spec;
		char *hash, *equals, *key, *value;

		origin.line++;
		/* fgets cuts a longer line in two, and the rest (of a
		 * comment, say) would be read as a line of its own. */
		if (strchr(line, '\n') == NULL && !feof(file)) {
			int next = getc(file);

			if (next != '\n' && next != EOF) {
				report(&origin, "line longer than %zu bytes",
				       sizeof(line) - 1);
				result = NIC_PARSE_ERROR;
				break;
			}
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		key = trim(line);
		if (*key == '\0')
			continue;
		equals = strchr(key, '=');
		if (equals == NULL) {
			report(&origin, "expected 'key = value', got '%s'",
			       key);
			result = NIC_PARSE_ERROR;
			break;
		}
		*equals = '\0';
		value = trim(equals + 1);
		key = trim(key);
		if (value[0] == '"' && strlen(value) >= 2 &&
		    value[strlen(value) - 1] == '"') {
			value[strlen(value) - 1] = '\0';
			value++;
		}
		spec = nic_option_find(key, strlen(key));
		if (spec == NULL || spec->argument == NULL) {
			report(&origin, "unknown key '%s' (see --help)", key);
			result = NIC_PARSE_ERROR;
			break;
		}
		result = apply(options, spec, value, &origin, depth);
	}
	fclose(file);
	return result;
}

static void set_defaults(struct nic_options *options, const char *program)
{
	memset(options, 0, sizeof(*options));
	options->eal_argv[0] = strdup(program);
	options->eal_argc = 1;
	options->port_mtu = 9000;
	options->mbufs_per_port = 8192;
	options->burst = 32;
	options->idle_sleep_max_us = 100;
	options->command_timeout_ms = 2000;
	options->queue_scale_pps = 200000;
	options->queue_scale_elephants = 4;
	options->queue_scale_down_s = 3;
	strcpy(options->grpc_address, NIC_DEFAULT_GRPC_ADDRESS);
	jg_engine_config_init(&options->engine);
	nic_pathmtu_config_init(&options->pmtu);
	/* 0: the next hop's MTU is the ports' (main). */
	options->pmtu.probe_mtu = 0;
}

enum nic_parse_result nic_options_parse(struct nic_options *options, int argc,
					char **argv)
{
	const struct origin command_line = {0};
	int separator = -1;
	int first_option = 1;

	set_defaults(options, argv[0]);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			nic_options_print_help(argv[0]);
			return NIC_PARSE_EXIT_SUCCESS;
		}
		if (!strcmp(argv[i], "--version")) {
			printf("jumbogate-nic %s\n", JUMBOGATE_NIC_VERSION);
			return NIC_PARSE_EXIT_SUCCESS;
		}
		if (separator < 0 && !strcmp(argv[i], "--"))
			separator = i;
	}
	/* DPDK convention: EAL arguments, "--", then the program's own. */
	if (separator >= 0) {
		if (separator >= NIC_MAX_EAL_ARGS - 1) {
			fprintf(stderr,
				"jumbogate-nic: more than %d EAL arguments\n",
				NIC_MAX_EAL_ARGS - 2);
			return NIC_PARSE_ERROR;
		}
		for (int i = 1; i < separator; i++)
			options->eal_argv[options->eal_argc++] =
				strdup(argv[i]);
		first_option = separator + 1;
	}
	for (int i = first_option; i < argc; i++) {
		const char *arg = argv[i];
		const struct option_spec *spec;
		const char *equals, *value;
		enum nic_parse_result result;

		if (strncmp(arg, "--", 2) != 0) {
			fprintf(stderr,
				"jumbogate-nic: unexpected argument '%s' (EAL "
				"arguments go before \"--\"; see --help)\n",
				arg);
			return NIC_PARSE_ERROR;
		}
		equals = strchr(arg, '=');
		spec = nic_option_find(arg + 2,
				       equals ? (size_t)(equals - arg - 2)
					      : strlen(arg + 2));
		if (spec == NULL) {
			fprintf(stderr,
				"jumbogate-nic: unknown option '%s' (see "
				"--help)\n",
				arg);
			return NIC_PARSE_ERROR;
		}
		if (spec->argument == NULL) {
			/* A flag: --help and --version were handled above.
			 * It takes no value: "--insecure=false" ignored would
			 * turn plaintext on. */
			if (equals) {
				fprintf(stderr,
					"jumbogate-nic: --%s takes no value, "
					"got '%s'\n",
					spec->name, arg);
				return NIC_PARSE_ERROR;
			}
			result = apply(options, spec, NULL, &command_line, 0);
			if (result != NIC_PARSE_OK)
				return result;
			continue;
		}
		if (equals) {
			value = equals + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			fprintf(stderr, "jumbogate-nic: --%s needs %s\n",
				spec->name, spec->argument);
			return NIC_PARSE_ERROR;
		}
		result = apply(options, spec, value, &command_line, 0);
		if (result != NIC_PARSE_OK)
			return result;
	}
	/* Until the ports are known (ports.c checks again), the MTUs given. */
	options->largest_port_mtu = options->smallest_port_mtu =
		options->port_mtu;
	for (unsigned int i = 0; i < options->port_mtu_count; i++) {
		options->largest_port_mtu = RTE_MAX(options->largest_port_mtu,
						    options->port_mtus[i].mtu);
		options->smallest_port_mtu = RTE_MIN(options->smallest_port_mtu,
						     options->port_mtus[i].mtu);
	}
	if (options->engine.default_path_mtu_v4 > options->largest_port_mtu ||
	    options->engine.default_path_mtu_v6 > options->largest_port_mtu ||
	    options->engine.internal_mtu > options->largest_port_mtu) {
		fprintf(stderr,
			"jumbogate-nic: --internal-mtu %u, "
			"--default-path-mtu-v4 %u and --default-path-mtu-v6 %u "
			"must not exceed the largest --port-mtu, %u\n",
			options->engine.internal_mtu,
			options->engine.default_path_mtu_v4,
			options->engine.default_path_mtu_v6,
			options->largest_port_mtu);
		return NIC_PARSE_ERROR;
	}
	{
		char error[NIC_ERROR_LEN];

		if (!jg_tls_options_check(&options->tls, error,
					  sizeof(error))) {
			fprintf(stderr, "jumbogate-nic: %s\n", error);
			return NIC_PARSE_ERROR;
		}
	}
	return NIC_PARSE_OK;
}

void nic_options_free(struct nic_options *options)
{
	for (int i = 0; i < options->eal_argc; i++)
		free(options->eal_argv[i]);
	options->eal_argc = 0;
}
