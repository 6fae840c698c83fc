/* notify.h -- telling systemd how rsp is doing (the unit's Type=notify):
 * READY=1 once it serves, RELOADING=1 and READY=1 around a reload,
 * STOPPING=1 when it stops. sd_notify's protocol done by hand, without
 * libsystemd: one datagram per message to the AF_UNIX socket named in
 * $NOTIFY_SOCKET ("@name": an abstract one). Nothing is sent without that
 * variable (rsp not started by systemd), nor by a worker (only the
 * process systemd started may speak: NotifyAccess=main). */
#ifndef RSP_NOTIFY_H
#define RSP_NOTIFY_H

/* Reads $NOTIFY_SOCKET for this process (the one systemd started). */
void notify_init(void);

/* READY=1: rsp listens (and its workers have started). */
void notify_ready(void);

/* RELOADING=1 with MONOTONIC_USEC=now: a reload begins (notify_ready
 * ends it, whatever its outcome). */
void notify_reloading(void);

/* STOPPING=1: rsp has begun to stop. */
void notify_stopping(void);

#endif
