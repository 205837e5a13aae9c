// SPDX-License-Identifier: Apache-2.0
#include "grpc_listen.h"
#include "log.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

namespace
{

// Health (grpc.health.v1) and reflection on every listener, for the tools
// operators point at a gRPC server (grpcurl, a load balancer's or a
// supervisor's health check). Both are registered before any ServerBuilder
// exists, as gRPC asks: a builder picks its plugins up when it is made.
// They answer only callers the identity check lets through.
struct StandardServices {
	StandardServices()
	{
		grpc::EnableDefaultHealthCheckService(true);
		grpc::reflection::InitProtoReflectionServerBuilderPlugin();
	}
} standard_services;

bool read_file(const char *path, std::string *text)
{
	std::ifstream in(path, std::ios::binary);
	std::stringstream buffer;

	if (!in)
		return false;
	buffer << in.rdbuf();
	*text = buffer.str();
	return !text->empty();
}

bool is_loopback(const sockaddr *address)
{
	if (address->sa_family == AF_INET) {
		auto in = reinterpret_cast<const sockaddr_in *>(address);
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (address->sa_family == AF_INET6) {
		auto in6 = reinterpret_cast<const sockaddr_in6 *>(address);
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

// gRPC only logs why a bind failed; binding once ourselves first turns the
// common mistakes into a message that names them. Also tells whether every
// address the host resolves to is a loopback one (an empty host, 0.0.0.0
// or [::] listens everywhere: not loopback).
bool check_tcp_address(const std::string &address, bool *loopback,
		       std::string *error)
{
	size_t colon = address.rfind(':');
	if (colon == std::string::npos || colon + 1 == address.size()) {
		*error = "gRPC address '" + address +
			 "' is neither HOST:PORT nor unix:PATH";
		return false;
	}
	std::string host = address.substr(0, colon);
	std::string port = address.substr(colon + 1);
	if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);

	addrinfo hints{};
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	addrinfo *found = nullptr;
	int resolved = getaddrinfo(host.empty() ? nullptr : host.c_str(),
				   port.c_str(), &hints, &found);
	if (resolved != 0) {
		*error = "gRPC address '" + address +
			 "': " + gai_strerror(resolved);
		return false;
	}
	bool usable = true;
	*loopback = true;
	for (addrinfo *ai = found; ai && usable; ai = ai->ai_next) {
		*loopback = *loopback && is_loopback(ai->ai_addr);
		int fd =
			socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
			*error = "gRPC address " + address + " is " +
				 (errno == EADDRINUSE
					  ? std::string("in use by another "
							"process")
					  : std::string(strerror(errno)));
			usable = false;
		}
		close(fd);
	}
	freeaddrinfo(found);
	return usable;
}

// Runs before every call, on the connection's verified client certificate:
// the call goes on only if one of the certificate's DNS subject alternative
// names is allowed. Only DNS SANs count (gRPC's peer_dns property): the
// generic SAN property mixes URI, e-mail and IP SANs, and a common name is
// whatever the requester wrote into it.
class AllowedIdentities : public grpc::AuthMetadataProcessor
{
      public:
	AllowedIdentities(std::set<std::string> allowed, std::string program)
	    : allowed_(std::move(allowed)), program_(std::move(program))
	{
	}

	// A set lookup: no need for a thread of its own.
	bool IsBlocking() const override
	{
		return false;
	}

	grpc::Status Process(const InputMetadata &, grpc::AuthContext *context,
			     OutputMetadata *, OutputMetadata *) override
	{
		std::string seen;
		for (const auto &name :
		     context->FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
			std::string dns(name.data(), name.size());
			if (allowed_.count(dns))
				return grpc::Status::OK;
			if (seen.size() < 200)
				seen += (seen.empty() ? "" : ", ") + dns;
		}
		std::string why =
			"the client certificate's DNS names (" +
			(seen.empty() ? std::string("none") : seen) +
			") are not among the identities allowed to call "
			"(--tls-allow)";
		uint32_t suppressed = 0;
		// Anyone the CA signed can cause this: a bounded number of
		// lines a second, the rest counted.
		if (jg_log_limited(&refusals_, kRefusalLinesPerSecond,
				   &suppressed))
			JG_LOG(jg_log_grpc, WARNING,
			       "%s: call refused: %s (%u more refused since "
			       "the last such line)\n",
			       program_.c_str(), why.c_str(), suppressed);
		return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
				    program_ + ": " + why);
	}

      private:
	static constexpr uint32_t kRefusalLinesPerSecond = 5;
	const std::set<std::string> allowed_;
	const std::string program_;
	struct jg_log_limit refusals_ = {};
};

std::shared_ptr<grpc::ServerCredentials>
mutual_tls(const char *program, const struct jg_tls_options &tls,
	   std::string *error)
{
	std::string cert, key, ca;

	// Read once here so that a file that cannot be read stops the start
	// with a message; from then on gRPC's watcher reads them.
	if (!read_file(tls.cert, &cert) || !read_file(tls.key, &key) ||
	    !read_file(tls.client_ca, &ca)) {
		*error = "cannot read the TLS certificate, key or client CA";
		return nullptr;
	}
	// The files are read again every reload_s seconds, and what changed
	// is served to new connections: a renewed certificate, key or CA
	// takes effect without a restart. A half-written set (a key that
	// does not match its certificate) is not taken; the old one stays.
	auto watcher = std::make_shared<
		grpc::experimental::FileWatcherCertificateProvider>(
		tls.key, tls.cert, tls.client_ca,
		tls.reload_s ? tls.reload_s : JG_TLS_RELOAD_DEFAULT_S);
	grpc::experimental::TlsServerCredentialsOptions options(watcher);
	options.watch_root_certs();
	options.watch_identity_key_cert_pairs();
	options.set_cert_request_type(
		GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
	auto credentials = grpc::experimental::TlsServerCredentials(options);
	std::set<std::string> allowed;
	for (unsigned int i = 0; i < tls.allow_count; i++)
		allowed.insert(tls.allow[i]);
	credentials->SetAuthMetadataProcessor(
		std::make_shared<AllowedIdentities>(allowed, program));
	return credentials;
}

} // namespace

bool jg_grpc_is_tcp(const std::string &address)
{
	return address.rfind("unix:", 0) != 0;
}

bool jg_grpc_listen(grpc::ServerBuilder &builder, const char *program,
		    const std::string &address,
		    const struct jg_tls_options &tls, int *bound_port,
		    std::string *error)
{
	// A unix socket is guarded by its file's permissions.
	bool loopback = true;
	std::shared_ptr<grpc::ServerCredentials> credentials;

	if (jg_grpc_is_tcp(address) &&
	    !check_tcp_address(address, &loopback, error))
		return false;
	if (jg_tls_enabled(&tls)) {
		credentials = mutual_tls(program, tls, error);
		if (!credentials)
			return false;
	} else if (!loopback && !tls.insecure) {
		*error = "refusing plaintext gRPC on " + address +
			 ", which is not a loopback address: anyone who "
			 "reaches it could call it. Give --tls-cert, "
			 "--tls-key and --tls-client-ca (mutual TLS), or "
			 "--insecure to accept that";
		return false;
	} else {
		if (!loopback)
			JG_LOG(jg_log_grpc, WARNING,
			       "%s: WARNING: plaintext gRPC on %s "
			       "(--insecure): anyone who reaches it can "
			       "call it\n",
			       program, address.c_str());
		credentials = grpc::InsecureServerCredentials();
	}
	// Two programs on one port would split the clients' calls between
	// them; refuse instead of sharing.
	builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
	builder.AddListeningPort(address, credentials,
				 jg_grpc_is_tcp(address) ? bound_port
							 : nullptr);
	return true;
}
