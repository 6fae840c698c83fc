/* notify.c -- readiness for systemd, by hand (notify.h). */
#include "notify.h"

#include "log.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Where messages go; length 0: nowhere. */
static struct {
    struct sockaddr_un address;
    socklen_t length;
    pid_t pid;                  /* the process that may send (not a worker) */
} notify;

void notify_init(void)
{
    const char *name = getenv("NOTIFY_SOCKET");
    size_t n;

    notify.length = 0;
    if (name == NULL || name[0] == '\0')
        return;
    n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n >= sizeof notify.address.sun_path) {
        log_msg("NOTIFY_SOCKET=%.100s is no socket rsp can tell systemd its state on: not telling it",
                name);
        return;
    }
    notify.address.sun_family = AF_UNIX;
    memcpy(notify.address.sun_path, name, n);
    if (name[0] == '@')
        notify.address.sun_path[0] = '\0'; /* abstract: no NUL at the end counts */
    notify.length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    notify.pid = getpid();
}

/* Sends text in one datagram, if there is somewhere to send it. */
static void send_state(const char *text)
{
    int fd;
    ssize_t sent;

    if (notify.length == 0 || getpid() != notify.pid)
        return;
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        log_errno("socket (NOTIFY_SOCKET)");
        return;
    }
    do
        sent = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&notify.address,
                      notify.length);
    while (sent == -1 && errno == EINTR);
    if (sent == -1)
        log_errno("telling systemd %.40s", text);
    if (close(fd) == -1)
        log_errno("close (NOTIFY_SOCKET)");
}

void notify_ready(void)
{
    send_state("READY=1");
}

void notify_reloading(void)
{
    struct timespec now;
    char text[80];

    if (clock_gettime(CLOCK_MONOTONIC, &now) == -1) {
        log_errno("clock_gettime");
        return;
    }
    snprintf(text, sizeof text, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000ULL);
    send_state(text);
}

void notify_stopping(void)
{
    send_state("STOPPING=1");
}
