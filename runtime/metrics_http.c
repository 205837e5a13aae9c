/* SPDX-License-Identifier: Apache-2.0 */
/* accept4() */
#define _GNU_SOURCE
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

#define IO_TIMEOUT_S 2
/* How often the wait for clients looks whether the server is stopping. */
#define STOP_CHECK_MS 100
/* How long the listening socket is left alone after an accept that failed
 * for want of descriptors or memory: the connection stays queued and the
 * socket readable, so polling it at once again spun a core. */
#define ACCEPT_BACKOFF_MS 100

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

/* One connection: its request arriving, then its answer leaving. */
struct connection {
	int fd;		  /* -1: the slot is free */
	int64_t accepted; /* now_ms(): the oldest is evicted first */
	/* Of the request's arrival, then of the answer's sending. */
	int64_t deadline;
	struct jg_metrics_request_head head;
	char *answer; /* header and body; NULL while the request arrives */
	size_t answer_length;
	size_t answer_sent;
};

static struct {
	int fd;
	pthread_t thread;
	bool running;
	atomic_bool stop;
	char prefix[64];
	jg_metrics_render_fn render;
	void *arg;
	atomic_uint_fast64_t requests[OUTCOMES];
	atomic_uint_fast64_t evicted;
	/* now_ms() before which the listening socket is not polled. */
	int64_t accept_paused_until;
	struct connection connections[JG_METRICS_CONNECTIONS];
} server = {.fd = -1};

/* Milliseconds on the monotonic clock. */
static int64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

bool jg_metrics_head_received(struct jg_metrics_request_head *head,
			      size_t length)
{
	head->used += length;
	head->bytes[head->used] = '\0';
	return head->used >= JG_METRICS_REQUEST_MAX ||
	       strstr(head->bytes, "\r\n\r\n") || strstr(head->bytes, "\n\n");
}

enum jg_metrics_request
jg_metrics_head_route(const struct jg_metrics_request_head *head)
{
	const char *request = head->bytes;

	if (strncmp(request, "GET ", 4) != 0 || !strchr(request, '\n'))
		return JG_METRICS_BAD_REQUEST;
	const char *path = request + 4;
	size_t path_length = strcspn(path, " ?\r\n");
	if (path_length != 8 || strncmp(path, "/metrics", 8) != 0)
		return JG_METRICS_NOT_FOUND;
	return JG_METRICS_SCRAPE;
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
	snprintf(name, sizeof(name), "%s_metrics_connections_evicted_total",
		 server.prefix);
	jg_metric_family(text, name, "counter",
			 "connections closed unanswered to make room for a "
			 "new one (16 are served at once)");
	jg_metric_sample(text, name, atomic_load(&server.evicted), NULL);
}

static void close_connection(struct connection *connection)
{
	close(connection->fd);
	free(connection->answer);
	connection->fd = -1;
	connection->answer = NULL;
}

/* Sends what the socket takes now; closes the connection once all is
 * sent or the client is gone. */
static void send_answer(struct connection *connection)
{
	while (connection->answer_sent < connection->answer_length) {
		ssize_t sent = send(
			connection->fd,
			connection->answer + connection->answer_sent,
			connection->answer_length - connection->answer_sent,
			MSG_NOSIGNAL | MSG_DONTWAIT);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (sent <= 0)
			break;
		connection->answer_sent += (size_t)sent;
	}
	close_connection(connection);
}

/* Answers the request as it stands (a request cut short by its deadline
 * or its client is answered as what arrived). The answer, header and body,
 * is given IO_TIMEOUT_S to be sent in all, however slowly the client
 * reads it. */
static void answer(struct connection *connection)
{
	struct jg_metrics_text text = {0};
	const char *status, *body;
	size_t body_length;
	enum outcome outcome;

	switch (jg_metrics_head_route(&connection->head)) {
	case JG_METRICS_SCRAPE:
		outcome = SERVED;
		break;
	case JG_METRICS_NOT_FOUND:
		outcome = NOT_FOUND;
		break;
	default:
		outcome = BAD_REQUEST;
		break;
	}
	atomic_fetch_add(&server.requests[outcome], 1);
	if (outcome == SERVED)
		render_scrape(&text);
	if (outcome == BAD_REQUEST) {
		status = "405 Method Not Allowed";
		body = "GET /metrics\n";
		body_length = strlen(body);
	} else if (outcome == NOT_FOUND) {
		status = "404 Not Found";
		body = "GET /metrics\n";
		body_length = strlen(body);
	} else if (text.failed) {
		status = "500 Internal Server Error";
		body = "out of memory\n";
		body_length = strlen(body);
	} else {
		status = "200 OK";
		body = text.data;
		body_length = text.length;
	}

	char header[256];
	int header_length =
		snprintf(header, sizeof(header),
			 "HTTP/1.0 %s\r\nContent-Type: text/plain; "
			 "version=0.0.4; charset=utf-8\r\nContent-Length: "
			 "%zu\r\nConnection: close\r\n\r\n",
			 status, body_length);
	connection->answer = malloc((size_t)header_length + body_length);
	if (connection->answer == NULL) {
		free(text.data);
		close_connection(connection);
		return;
	}
	memcpy(connection->answer, header, (size_t)header_length);
	if (body_length > 0)
		memcpy(connection->answer + header_length, body, body_length);
	free(text.data);
	connection->answer_length = (size_t)header_length + body_length;
	connection->answer_sent = 0;
	connection->deadline = now_ms() + IO_TIMEOUT_S * 1000;
	send_answer(connection);
}

/* Reads what has arrived of the request; answers it once whole, or once
 * the client has stopped sending (closed, or failed). */
static void receive_request(struct connection *connection)
{
	struct jg_metrics_request_head *head = &connection->head;

	for (;;) {
		ssize_t got =
			recv(connection->fd, head->bytes + head->used,
			     JG_METRICS_REQUEST_MAX - head->used, MSG_DONTWAIT);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (got <= 0 || jg_metrics_head_received(head, (size_t)got))
			break;
	}
	answer(connection);
}

/* A slot for a new connection: a free one, else the oldest connection
 * still sending its request (the likeliest to be a client that stalls),
 * else the oldest, closed and counted. A scrape's request arrives at
 * once and is answered at once, so it is never the oldest for long. */
static struct connection *free_slot(void)
{
	struct connection *oldest = NULL, *oldest_reading = NULL;

	for (unsigned int i = 0; i < JG_METRICS_CONNECTIONS; i++) {
		struct connection *connection = &server.connections[i];

		if (connection->fd < 0)
			return connection;
		if (oldest == NULL || connection->accepted < oldest->accepted)
			oldest = connection;
		if (connection->answer == NULL &&
		    (oldest_reading == NULL ||
		     connection->accepted < oldest_reading->accepted))
			oldest_reading = connection;
	}
	if (oldest_reading != NULL)
		oldest = oldest_reading;
	close_connection(oldest);
	atomic_fetch_add(&server.evicted, 1);
	return oldest;
}

/* Connections are not inherited by a program the process runs, and never
 * block the one thread that serves them all. */
static void accept_connection(void)
{
	int fd = accept4(server.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM)
			server.accept_paused_until =
				now_ms() + ACCEPT_BACKOFF_MS;
		return;
	}
	struct connection *connection = free_slot();
	connection->fd = fd;
	connection->accepted = now_ms();
	connection->deadline = connection->accepted + IO_TIMEOUT_S * 1000;
	connection->head.used = 0;
	connection->head.bytes[0] = '\0';
	connection->answer = NULL;
}

/* Each turn: connections past their deadline are answered (a request) or
 * closed (an answer); then one poll over the listening socket and every
 * connection, at most STOP_CHECK_MS so a stop is seen; then whatever is
 * ready reads, sends or is accepted. */
static void *serve_loop(void *unused)
{
	struct pollfd ready[1 + JG_METRICS_CONNECTIONS];
	struct connection *polled[1 + JG_METRICS_CONNECTIONS];

	(void)unused;
	for (unsigned int i = 0; i < JG_METRICS_CONNECTIONS; i++)
		server.connections[i].fd = -1;
	while (!atomic_load(&server.stop)) {
		int64_t now = now_ms(), wake = now + STOP_CHECK_MS;
		nfds_t count = 1;

		/* A negative fd is left out of the poll. */
		bool paused = server.accept_paused_until > now;
		ready[0] = (struct pollfd){.fd = paused ? -1 : server.fd,
					   .events = POLLIN};
		if (paused && server.accept_paused_until < wake)
			wake = server.accept_paused_until;
		for (unsigned int i = 0; i < JG_METRICS_CONNECTIONS; i++) {
			struct connection *connection = &server.connections[i];

			if (connection->fd >= 0 &&
			    connection->deadline <= now) {
				if (connection->answer == NULL)
					answer(connection);
				else
					close_connection(connection);
			}
			if (connection->fd < 0)
				continue;
			if (connection->deadline < wake)
				wake = connection->deadline;
			polled[count] = connection;
			ready[count++] = (struct pollfd){
				.fd = connection->fd,
				.events =
					connection->answer ? POLLOUT : POLLIN};
		}
		int waited =
			poll(ready, count, (int)(wake > now ? wake - now : 0));
		if (waited <= 0)
			continue;
		for (nfds_t i = 1; i < count; i++) {
			if (ready[i].revents == 0)
				continue;
			if (polled[i]->answer == NULL)
				receive_request(polled[i]);
			else
				send_answer(polled[i]);
		}
		if (ready[0].revents & POLLIN)
			accept_connection();
	}
	/* A request not yet answered by the stop is dropped. */
	for (unsigned int i = 0; i < JG_METRICS_CONNECTIONS; i++)
		if (server.connections[i].fd >= 0)
			close_connection(&server.connections[i]);
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
	if (pthread_create(&server.thread, NULL, serve_loop, NULL) != 0) {
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
