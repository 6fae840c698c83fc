/* pid_file.h -- `pid_file`: the master's (or rsp alone's) process id in
 * a file, as nginx keeps one, for scripts and tools that signal rsp
 * (kill -HUP $(cat /run/rsp.pid)). Written once the ports are bound,
 * while rsp is still root (so the file is root's), in one rename (a
 * reader never sees half of it); removed at a clean exit. A file naming
 * an rsp that still runs refuses the start. */
#ifndef RSP_PID_FILE_H
#define RSP_PID_FILE_H

/* Refuses to start if path names a process that runs and is rsp (its
 * /proc/PID/comm is ours): returns -1 after saying "already running as
 * PID N". A missing or stale file (no such process, another program, a
 * file that does not hold a pid) returns 0. */
int pid_file_check(const char *path);

/* Writes this process's id to path (a temporary file in the same
 * directory, renamed over it). Returns 0, or -1 after logging. */
int pid_file_write(const char *path);

/* Removes the file pid_file_write wrote, if it still holds this
 * process's id (another rsp may have taken it over since); nothing if
 * none was written. */
void pid_file_remove(void);

#endif
