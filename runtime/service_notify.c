/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sd_notify's wire protocol, which is small and stable: one datagram of
 * newline-separated KEY=VALUE lines to the AF_UNIX socket named in
 * $NOTIFY_SOCKET (a leading '@' names an abstract socket). Written here
 * rather than linked from libsystemd so the programs need no library a
 * DPU's minimal image may lack.
 */
#include "service_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int jg_service_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	size_t length;
	ssize_t sent;
	int fd;

	if (path == NULL || path[0] == '\0')
		return 0;
	length = strlen(path);
	if ((path[0] != '/' && path[0] != '@') ||
	    length >= sizeof(address.sun_path)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(address.sun_path, path, length);
	if (path[0] == '@')
		address.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	sent = sendto(
		fd, state, strlen(state), MSG_NOSIGNAL,
		(const struct sockaddr *)&address,
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + length));
	close(fd);
	return sent < 0 ? -1 : 1;
}
