/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How jumbogate-nic and jumbogate-switch secure their gRPC listener: mutual
 * TLS (a server certificate and key, the CA that client certificates must
 * chain to, and the client identities allowed to call), or plaintext, which
 * a listener on anything but a loopback address only gets with an explicit
 * --insecure. Both programs parse the same five options into this struct
 * and hand it to jg_grpc_listen.
 *
 * A certificate from the CA is not by itself a grant: the CA also signs the
 * operator's dashboards and other tools. With TLS, every call's client
 * certificate must carry one of the --tls-allow names as a DNS subject
 * alternative name (one SAN type only: a URI, e-mail or IP SAN, or the
 * common name, that happens to spell an allowed name does not count).
 */
#ifndef JUMBOGATE_RUNTIME_TLS_OPTIONS_H
#define JUMBOGATE_RUNTIME_TLS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JG_TLS_PATH_LEN 512
/* Identities allowed to call: the controllers of one rack, a few tools. */
#define JG_TLS_ALLOW_MAX 16
/* A DNS name is at most 253 characters. */
#define JG_TLS_NAME_LEN 254

struct jg_tls_options {
	char cert[JG_TLS_PATH_LEN];	 /* PEM server certificate (chain) */
	char key[JG_TLS_PATH_LEN];	 /* PEM private key of cert */
	char client_ca[JG_TLS_PATH_LEN]; /* PEM CA client certificates need */
	bool insecure; /* plaintext allowed on a non-loopback address */
	/* DNS SANs a client certificate must carry one of (--tls-allow) */
	char allow[JG_TLS_ALLOW_MAX][JG_TLS_NAME_LEN];
	unsigned int allow_count;
	/* How often the three files are read again (--tls-reload-s; 0: the
	 * default): a renewed certificate or CA is served to new connections
	 * without a restart. */
	unsigned int reload_s;
};

#define JG_TLS_RELOAD_DEFAULT_S 60
#define JG_TLS_RELOAD_MAX_S	86400

/* The options' help lines, the same in both programs. */
#define JG_TLS_OPTIONS_HELP                                                    \
	"  --tls-cert FILE       serve gRPC over TLS with this certificate "   \
	"(PEM)\n"                                                              \
	"  --tls-key FILE        its private key (PEM)\n"                      \
	"  --tls-client-ca FILE  require client certificates from this CA "    \
	"(PEM;\n"                                                              \
	"                        the three go together: mutual TLS)\n"         \
	"  --tls-allow NAME      a client identity allowed to call: a DNS "    \
	"subject\n"                                                            \
	"                        alternative name of its certificate "         \
	"(repeat, at\n"                                                        \
	"                        most 16; with TLS at least one is needed)\n"  \
	"  --tls-reload-s N      read the three files again every N seconds "  \
	"(default\n"                                                           \
	"                        60): renew a certificate by writing new "     \
	"files\n"                                                              \
	"                        over the old ones, no restart\n"              \
	"  --insecure            allow plaintext gRPC on a non-loopback "      \
	"address\n"                                                            \
	"                        (anyone who reaches it may call it; warned "  \
	"at start)\n"

/* Stores the value of --tls-cert, --tls-key or --tls-client-ca (`name`
 * without the dashes), adds a --tls-allow name, or sets --insecure (value
 * NULL). Returns false, with the reason in `error`, for an unknown name, a
 * path or name too long, or one --tls-allow too many. */
bool jg_tls_option(struct jg_tls_options *tls, const char *name,
		   const char *value, char *error, size_t error_len);

/* True when the name is one of the six options (without dashes). */
bool jg_tls_option_known(const char *name);

/* Checks the options as a whole: all three files or none, each readable,
 * not both TLS and --insecure, and --tls-allow exactly when TLS is on. */
bool jg_tls_options_check(const struct jg_tls_options *tls, char *error,
			  size_t error_len);

static inline bool jg_tls_enabled(const struct jg_tls_options *tls)
{
	return tls->cert[0] != '\0';
}

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_RUNTIME_TLS_OPTIONS_H */
