/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Telling a service manager how the program is doing (systemd's sd_notify
 * protocol): "READY=1" once it forwards, "STOPPING=1" when it begins to
 * stop. Under a unit of Type=notify, systemd starts what depends on the
 * program only after READY=1, so a controller started after the switch
 * finds its P4Runtime server listening.
 */
#ifndef JUMBOGATE_SERVICE_NOTIFY_H
#define JUMBOGATE_SERVICE_NOTIFY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sends STATE (e.g. "READY=1\nSTATUS=forwarding") to $NOTIFY_SOCKET.
 * Returns 1 when sent, 0 when no service manager listens (the variable is
 * unset: started by hand), -1 (errno set) when the socket refused it. */
int jg_service_notify(const char *state);

#ifdef __cplusplus
}
#endif

#endif
