/* proctitle.h -- what ps shows for each process: the master and the
 * workers name themselves as nginx's do ("rsp: master process
 * /etc/rsp/rsp.lua", "rsp: worker process 1"), so that an operator can
 * tell them apart (and signal the master). Linux shows a process's
 * command line from the memory that held argv at exec: a new title is
 * written over it, and over the environment strings that follow it, once
 * those have been copied elsewhere (as nginx's ngx_setproctitle does).
 * The process's name (/proc/PID/comm, what pkill and pgrep match) stays
 * "rsp". */
#ifndef RSP_PROCTITLE_H
#define RSP_PROCTITLE_H

/* Copies the arguments and the environment out of the way of argv's
 * memory (argv and environ point at the copies), which from here on may
 * be written over: to be called first thing in main, before anything
 * keeps a pointer into either. Returns 0, or -1 after logging (then
 * proctitle_set does nothing). */
int proctitle_init(int argc, char *argv[]);

/* Sets the command line ps shows to the formatted text (cut to the room
 * argv and the environment had). */
void proctitle_set(const char *format, ...) __attribute__((format(printf, 1, 2)));

#endif
