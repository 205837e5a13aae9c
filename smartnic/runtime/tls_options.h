/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How jumbogate-nic and jumbogate-switch secure their gRPC listener: mutual
 * TLS (a server certificate and key, and the CA that client certificates
 * must chain to), or plaintext, which a listener on anything but a loopback
 * address only gets with an explicit --insecure. Both programs parse the
 * same four options into this struct and hand it to jg_grpc_listen.
 */
#ifndef JUMBOGATE_RUNTIME_TLS_OPTIONS_H
#define JUMBOGATE_RUNTIME_TLS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JG_TLS_PATH_LEN 512

struct jg_tls_options {
	char cert[JG_TLS_PATH_LEN];	 /* PEM server certificate (chain) */
	char key[JG_TLS_PATH_LEN];	 /* PEM private key of cert */
	char client_ca[JG_TLS_PATH_LEN]; /* PEM CA client certificates need */
	bool insecure; /* plaintext allowed on a non-loopback address */
};

/* The options' help lines, the same in both programs. */
#define JG_TLS_OPTIONS_HELP                                                    \
	"  --tls-cert FILE       serve gRPC over TLS with this certificate "   \
	"(PEM)\n"                                                              \
	"  --tls-key FILE        its private key (PEM)\n"                      \
	"  --tls-client-ca FILE  require client certificates from this CA "    \
	"(PEM;\n"                                                              \
	"                        the three go together: mutual TLS)\n"         \
	"  --insecure            allow plaintext gRPC on a non-loopback "      \
	"address\n"                                                            \
	"                        (anyone who reaches it may call it; warned "  \
	"at start)\n"

/* Stores the value of --tls-cert, --tls-key or --tls-client-ca (`name`
 * without the dashes) or sets --insecure (value NULL). Returns false, with
 * the reason in `error`, for an unknown name or a path too long. */
bool jg_tls_option(struct jg_tls_options *tls, const char *name,
		   const char *value, char *error, size_t error_len);

/* True when the names is one of the four options (without dashes). */
bool jg_tls_option_known(const char *name);

/* Checks the options as a whole: all three files or none, each readable,
 * and not both TLS and --insecure. */
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
