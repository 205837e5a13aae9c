// SPDX-License-Identifier: Apache-2.0
//
// The gRPC listener both programs open (jumbogate-nic's control API,
// jumbogate-switch's P4Runtime): the address checked before gRPC binds it,
// so the usual mistakes get a message that names them, and the channel
// secured as the TLS options say.
#ifndef JUMBOGATE_RUNTIME_GRPC_LISTEN_H
#define JUMBOGATE_RUNTIME_GRPC_LISTEN_H

#include <string>

#include <grpcpp/grpcpp.h>

#include "tls_options.h"

// Adds `address` (HOST:PORT or unix:PATH) to the builder as its listening
// port. HOST:PORT must resolve and be free. With TLS options the port takes
// mutual TLS only (a client without a certificate from the client CA is
// refused in the handshake, and every call of a client whose certificate
// has no --tls-allow name as a DNS SAN gets PERMISSION_DENIED); without
// them it is plaintext, which is refused
// on an address other than loopback unless tls.insecure, and then warned
// about on stderr as `program`. *bound_port receives the port gRPC bound
// (0 if it could not); it stays untouched for unix:PATH. Returns false with
// the reason in *error.
bool jg_grpc_listen(grpc::ServerBuilder &builder, const char *program,
		    const std::string &address,
		    const struct jg_tls_options &tls, int *bound_port,
		    std::string *error);

// Whether a bound port may be checked: false for unix:PATH.
bool jg_grpc_is_tcp(const std::string &address);

#endif // JUMBOGATE_RUNTIME_GRPC_LISTEN_H
