/* SPDX-License-Identifier: Apache-2.0 */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQUEST_MAX  4096
#define IO_TIMEOUT_S 2
/* How often a wait for a client looks whether the server is stopping. */
#define STOP_CHECK_MS 100

static void append(struct jg_metrics_text *text, const char *format, ...)
{
	va_list args;
	int needed;

	if (text->failed)
		return;
	for (;;) {
		size_t room = text->capacity - text->length;

		va_start(args, format);
		needed =
			vsnprintf(text->data ? text->data + text->length : NULL,
				  room, format, args);
		va_end(args);
		if (needed < 0) {
			text->failed = true;
			return;
		}
		if ((size_t)needed < room) {
			text->length += (size_t)needed;
			return;
		}
		size_t capacity = text->capacity ? text->capacity * 2 : 16384;
		while (capacity - text->length <= (size_t)needed)
			capacity *= 2;
		char *grown = realloc(text->data, capacity);
		if (grown == NULL) {
			text->failed = true;
			return;
		}
		text->data = grown;
		text->capacity = capacity;
	}
}

void jg_metric_family(struct jg_metrics_text *text, const char *name,
		      const char *type, const char *help)
{
	append(text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values as the exposition format quotes them: backslash, quote and
 * newline escaped (an interface name may hold a quote). */
static void append_label_value(struct jg_metrics_text *text, const char *value)
{
	for (const char *c = value; *c; c++) {
		if (*c == '\\' || *c == '"')
			append(text, "\\%c", *c);
		else if (*c == '\n')
			append(text, "\\n");
		else
			append(text, "%c", *c);
	}
}

void jg_metric_sample(struct jg_metrics_text *text, const char *name,
		      uint64_t value, const char *const *labels)
{
	append(text, "%s", name);
	if (labels != NULL && labels[0] != NULL) {
		append(text, "{");
		for (unsigned int i = 0; labels[i] && labels[i + 1]; i += 2) {
			append(text, "%s%s=\"", i ? "," : "", labels[i]);
			append_label_value(text, labels[i + 1]);
			append(text, "\"");
		}
		append(text, "}");
	}
	append(text, " %" PRIu64 "\n", value);
}

enum outcome { SERVED, NOT_FOUND, BAD_REQUEST, OUTCOMES };
static const char *const OUTCOME_NAMES[OUTCOMES] = {"served", "not_found",
						    "bad_request"};

static struct {
	int fd;
	pthread_t thread;
	bool running;
	atomic_bool stop;
	char prefix[64];
	jg_metrics_render_fn render;
	void *arg;
	atomic_uint_fast64_t requests[OUTCOMES];
} server = {.fd = -1};

/* Milliseconds on the monotonic clock. */
static int64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Waits until FD is ready for EVENTS, at most until DEADLINE (now_ms()):
 * false when the deadline passes, the connection fails or the server
 * stops (jg_metrics_stop() waits for no client). */
static bool wait_ready(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		struct pollfd ready = {.fd = fd, .events = events};
		int n;

		if (left <= 0 || atomic_load(&server.stop))
			return false;
		n = poll(&ready, 1,
			 left < STOP_CHECK_MS ? (int)left : STOP_CHECK_MS);
		if (n > 0)
			return true;
		if (n < 0 && errno != EINTR)
			return false;
	}
}

static bool send_all(int fd, const char *data, size_t length, int64_t deadline)
{
	while (length > 0) {
		ssize_t sent;

		if (!wait_ready(fd, POLLOUT, deadline))
			return false;
		sent = send(fd, data, length, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			continue;
		if (sent <= 0)
			return false;
		data += sent;
		length -= (size_t)sent;
	}
	return true;
}

/* The answer, header and body, is given IO_TIMEOUT_S to be sent in all,
 * however slowly the client reads it. */
static void respond(int fd, const char *status, const char *body, size_t length)
{
	const int64_t deadline = now_ms() + IO_TIMEOUT_S * 1000;
	char header[256];
	int n = snprintf(header, sizeof(header),
			 "HTTP/1.0 %s\r\nContent-Type: text/plain; "
			 "version=0.0.4; charset=utf-8\r\nContent-Length: "
			 "%zu\r\nConnection: close\r\n\r\n",
			 status, length);
	if (send_all(fd, header, (size_t)n, deadline))
		send_all(fd, body, length, deadline);
}

static void render_scrape(struct jg_metrics_text *text)
{
	char name[128];

	server.render(text, server.arg);
	snprintf(name, sizeof(name), "%s_metrics_requests_total",
		 server.prefix);
	jg_metric_family(text, name, "counter",
			 "requests this endpoint answered, by outcome");
	for (unsigned int o = 0; o < OUTCOMES; o++) {
		const char *labels[] = {"outcome", OUTCOME_NAMES[o], NULL};
		jg_metric_sample(text, name, atomic_load(&server.requests[o]),
				 labels);
	}
}

/* Reads the request head (up to REQUEST_MAX bytes) and answers it. The
 * whole head is given IO_TIMEOUT_S from the connection's accept, however
 * it trickles in: a time limit on each read would let a client that sends
 * a byte now and then hold the endpoint, and the program's stop, for as
 * long as it likes. A request cut short is answered as what arrived; one
 * that has not arrived by the server's stop is dropped. */
static void serve(int fd)
{
	const int64_t deadline = now_ms() + IO_TIMEOUT_S * 1000;
	char request[REQUEST_MAX + 1];
	size_t used = 0;

	while (used < REQUEST_MAX) {
		ssize_t got;

		if (!wait_ready(fd, POLLIN, deadline))
			break;
		got = recv(fd, request + used, REQUEST_MAX - used,
			   MSG_DONTWAIT);
		if (got < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			continue;
		if (got <= 0)
			break;
		used += (size_t)got;
		request[used] = '\0';
		if (strstr(request, "\r\n\r\n") || strstr(request, "\n\n"))
			break;
	}
	request[used] = '\0';
	if (strncmp(request, "GET ", 4) != 0 || !strchr(request, '\n')) {
		atomic_fetch_add(&server.requests[BAD_REQUEST], 1);
		respond(fd, "405 Method Not Allowed", "GET /metrics\n", 13);
		return;
	}
	const char *path = request + 4;
	size_t path_length = strcspn(path, " ?\r\n");
	if (path_length != 8 || strncmp(path, "/metrics", 8) != 0) {
		atomic_fetch_add(&server.requests[NOT_FOUND], 1);
		respond(fd, "404 Not Found", "GET /metrics\n", 13);
		return;
	}
	atomic_fetch_add(&server.requests[SERVED], 1);
	struct jg_metrics_text text = {0};
	render_scrape(&text);
	if (text.failed)
		respond(fd, "500 Internal Server Error", "out of memory\n", 14);
	else
		respond(fd, "200 OK", text.data, text.length);
	free(text.data);
}

static void *accept_loop(void *unused)
{
	(void)unused;
	while (!atomic_load(&server.stop)) {
		struct pollfd ready = {.fd = server.fd, .events = POLLIN};
		if (poll(&ready, 1, 200) <= 0)
			continue;
		int fd = accept(server.fd, NULL, NULL);
		if (fd < 0)
			continue;
		serve(fd);
		close(fd);
	}
	return NULL;
}

static bool loopback(const struct sockaddr *address)
{
	if (address->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)address)
				      ->sin_addr.s_addr) >>
			24) == 127;
	if (address->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
			&((const struct sockaddr_in6 *)address)->sin6_addr);
	return false;
}

/* Decimal digits only, 1..65535. */
static bool valid_port(const char *text)
{
	unsigned long port = 0;

	if (*text == '\0')
		return false;
	for (const char *c = text; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		port = port * 10 + (unsigned long)(*c - '0');
		if (port > 65535)
			return false;
	}
	return port >= 1;
}

bool jg_metrics_start(const char *address, const char *prefix,
		      jg_metrics_render_fn render, void *arg, char *error,
		      size_t error_size)
{
	char host[256];
	const char *colon = strrchr(address, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *found = NULL;
	size_t host_length;
	int one = 1;

	if (colon == NULL || colon == address || colon[1] == '\0' ||
	    (size_t)(colon - address) >= sizeof(host)) {
		snprintf(error, error_size,
			 "metrics address '%s' is not HOST:PORT", address);
		return false;
	}
	/* Checked here: getaddrinfo would take 99999 modulo 65536, and 0 (or
	 * 65536) as any free port, and the scrape would go elsewhere. */
	if (!valid_port(colon + 1)) {
		snprintf(error, error_size,
			 "metrics address '%s': the port must be 1..65535",
			 address);
		return false;
	}
	host_length = (size_t)(colon - address);
	memcpy(host, address, host_length);
	host[host_length] = '\0';
	if (host[0] == '[' && host_length >= 2 &&
	    host[host_length - 1] == ']') {
		memmove(host, host + 1, host_length - 2);
		host[host_length - 2] = '\0';
	}
	if (getaddrinfo(host, colon + 1, &hints, &found) != 0 ||
	    !loopback(found->ai_addr)) {
		snprintf(error, error_size,
			 "refusing metrics on '%s': the endpoint has no TLS "
			 "and checks no caller, so it listens on a loopback "
			 "address only (127.0.0.1:PORT or [::1]:PORT)",
			 address);
		if (found)
			freeaddrinfo(found);
		return false;
	}
	server.fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (server.fd >= 0)
		setsockopt(server.fd, SOL_SOCKET, SO_REUSEADDR, &one,
			   sizeof(one));
	if (server.fd < 0 ||
	    bind(server.fd, found->ai_addr, found->ai_addrlen) != 0 ||
	    listen(server.fd, 16) != 0) {
		snprintf(error, error_size, "metrics address %s: %s", address,
			 strerror(errno));
		freeaddrinfo(found);
		if (server.fd >= 0)
			close(server.fd);
		server.fd = -1;
		return false;
	}
	freeaddrinfo(found);
	snprintf(server.prefix, sizeof(server.prefix), "%s", prefix);
	server.render = render;
	server.arg = arg;
	atomic_store(&server.stop, false);
	if (pthread_create(&server.thread, NULL, accept_loop, NULL) != 0) {
		snprintf(error, error_size, "metrics: no thread: %s",
			 strerror(errno));
		close(server.fd);
		server.fd = -1;
		return false;
	}
	server.running = true;
	return true;
}

void jg_metrics_stop(void)
{
	if (!server.running)
		return;
	atomic_store(&server.stop, true);
	pthread_join(server.thread, NULL);
	close(server.fd);
	server.fd = -1;
	server.running = false;
}
