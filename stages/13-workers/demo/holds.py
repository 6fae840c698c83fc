#!/usr/bin/env python3
"""holds.py PORT STATUS_PORT NAME=PID... -- what each process holds, read
from /proc: its epoll instance, its signalfd, the socket listening on
PORT (rsp's public listener) and the one on STATUS_PORT (the status
listener); for each listening socket, whether the process's epoll
instance watches it (the `tfd` lines of /proc/PID/fdinfo of the epoll
fd), and with which flag (EPOLLEXCLUSIVE or not). Sockets are named by
the order their inodes first appear (socket A, socket B, ...), so that
the output says which processes share one."""
import os
import sys

EPOLLEXCLUSIVE = 1 << 28


def listening_inodes(port):
    """The inodes of the sockets listening on 127.0.0.1:port."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


port, status_port = int(sys.argv[1]), int(sys.argv[2])
public, status = listening_inodes(port), listening_inodes(status_port)
names = {}
for arg in sys.argv[3:]:
    name, pid = arg.split("=")
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    watched = {}
    for fd, target in fds.items():
        if target == "anon_inode:[eventpoll]":
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("tfd:"):
                        words = line.split()
                        watched[int(words[1])] = int(words[3], 16)
    held = []
    if "anon_inode:[eventpoll]" in fds.values():
        held.append("epoll")
    if "anon_inode:[signalfd]" in fds.values():
        held.append("signalfd")
    for fd, target in sorted(fds.items()):
        inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
        if inode in public or inode in status:
            label = names.setdefault(inode, "socket " + "ABCDEFGH"[len(names)])
            what = "listening on PORT" if inode in public else "status listener"
            if fd not in watched:
                how = "not watched"
            elif watched[fd] & EPOLLEXCLUSIVE:
                how = "watched, EPOLLEXCLUSIVE"
            else:
                how = "watched"
            held.append(f"{label} ({what}; {how})")
    print(f"{name}: {', '.join(held)}")
