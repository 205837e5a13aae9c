/* SPDX-License-Identifier: Apache-2.0 */
/* The gRPC server of nic.proto, callable from C. */
#ifndef JUMBOGATE_NIC_GRPC_SERVER_H
#define JUMBOGATE_NIC_GRPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "tls_options.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start serving on address (HOST:PORT or unix:PATH) in gRPC's own
 * threads. Returns false with a reason naming the problem (e.g. the
 * address is in use). */
bool nic_grpc_start(const char *address, const struct jg_tls_options *tls,
		    char *error, size_t error_len);

/* Stop accepting calls and wait for the running ones to finish. */
void nic_grpc_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_NIC_GRPC_SERVER_H */
