/* SPDX-License-Identifier: Apache-2.0 */
#include "tls_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slot(struct jg_tls_options *tls, const char *name)
{
	if (strcmp(name, "tls-cert") == 0)
		return tls->cert;
	if (strcmp(name, "tls-key") == 0)
		return tls->key;
	if (strcmp(name, "tls-client-ca") == 0)
		return tls->client_ca;
	return NULL;
}

bool jg_tls_option_known(const char *name)
{
	struct jg_tls_options scratch;

	return strcmp(name, "insecure") == 0 ||
	       strcmp(name, "tls-allow") == 0 ||
	       strcmp(name, "tls-reload-s") == 0 ||
	       slot(&scratch, name) != NULL;
}

static bool add_allowed(struct jg_tls_options *tls, const char *value,
			char *error, size_t error_len)
{
	if (value[0] == '\0' || strlen(value) >= JG_TLS_NAME_LEN) {
		snprintf(error, error_len,
			 "--tls-allow: the name is empty or longer than %d "
			 "bytes",
			 JG_TLS_NAME_LEN - 1);
		return false;
	}
	if (tls->allow_count >= JG_TLS_ALLOW_MAX) {
		snprintf(error, error_len,
			 "--tls-allow: at most %d identities (a few "
			 "controllers and tools, not a directory)",
			 JG_TLS_ALLOW_MAX);
		return false;
	}
	strcpy(tls->allow[tls->allow_count++], value);
	return true;
}

bool jg_tls_option(struct jg_tls_options *tls, const char *name,
		   const char *value, char *error, size_t error_len)
{
	char *to = slot(tls, name);

	if (strcmp(name, "insecure") == 0) {
		tls->insecure = true;
		return true;
	}
	if (strcmp(name, "tls-allow") == 0 && value)
		return add_allowed(tls, value, error, error_len);
	if (strcmp(name, "tls-reload-s") == 0 && value) {
		char *end;
		unsigned long seconds = strtoul(value, &end, 10);

		if (value[0] < '0' || value[0] > '9' || *end != '\0' ||
		    seconds < 1 || seconds > JG_TLS_RELOAD_MAX_S) {
			snprintf(error, error_len,
				 "--tls-reload-s is a number of seconds from "
				 "1 to %d, got '%s'",
				 JG_TLS_RELOAD_MAX_S, value);
			return false;
		}
		tls->reload_s = (unsigned int)seconds;
		return true;
	}
	if (!to || !value) {
		snprintf(error, error_len, "--%s is not a TLS option", name);
		return false;
	}
	if (value[0] == '\0' || strlen(value) >= JG_TLS_PATH_LEN) {
		snprintf(error, error_len,
			 "--%s: the path is empty or longer than %d bytes",
			 name, JG_TLS_PATH_LEN - 1);
		return false;
	}
	strcpy(to, value);
	return true;
}

bool jg_tls_options_check(const struct jg_tls_options *tls, char *error,
			  size_t error_len)
{
	const struct {
		const char *option;
		const char *path;
	} files[] = {
		{"--tls-cert", tls->cert},
		{"--tls-key", tls->key},
		{"--tls-client-ca", tls->client_ca},
	};
	int given = 0;

	for (size_t i = 0; i < 3; i++)
		given += files[i].path[0] != '\0';
	if (given == 0 && tls->allow_count > 0) {
		snprintf(error, error_len,
			 "--tls-allow needs mutual TLS: give --tls-cert, "
			 "--tls-key and --tls-client-ca too");
		return false;
	}
	if (given == 0)
		return true;
	if (given != 3) {
		snprintf(error, error_len,
			 "--tls-cert, --tls-key and --tls-client-ca go "
			 "together (mutual TLS): give all three or none");
		return false;
	}
	if (tls->insecure) {
		snprintf(error, error_len,
			 "--insecure contradicts the TLS options: give one or "
			 "the other");
		return false;
	}
	for (size_t i = 0; i < 3; i++) {
		if (access(files[i].path, R_OK) != 0) {
			snprintf(error, error_len, "%s %s: cannot read it",
				 files[i].option, files[i].path);
			return false;
		}
	}
	/* The CA signs more than the callers of this API (dashboards, the
	 * other parts of the border): name who may call. */
	if (tls->allow_count == 0) {
		snprintf(error, error_len,
			 "mutual TLS needs at least one --tls-allow NAME: a "
			 "certificate from the client CA is not by itself a "
			 "grant (name the controllers' DNS SANs)");
		return false;
	}
	return true;
}
