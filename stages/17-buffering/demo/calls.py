#!/usr/bin/env python3
"""calls.py -- what strace saw rsp do, made short.

  calls.py count N [--timing NAME]... LABEL=FILE...
                                   FILEs are `strace -c` summaries of N
                                   requests each: a table of system calls
                                   per request by name, one column per
                                   LABEL, and the total; the counts of a
                                   call named by --timing move with the
                                   timing (how many events one epoll_wait
                                   finds), and are marked with a ~
                                   (--timing all: every count);
                                   --rows A,B,...: those rows in that
                                   order, every other call as "others"
  calls.py trace LISTEN BACKEND FILE
                                   FILE is an `strace -yy` log: each call,
                                   with sockets named by their ports
                                   (client: rsp's LISTEN port; backend:
                                   the BACKEND port), sizes instead of
                                   bytes, and epoll's events without
                                   their data"""
import re
import sys


def summary(path):
    """{name: (calls, errors)} from an strace -c table."""
    counts = {}
    for line in open(path):
        fields = line.split()
        if len(fields) < 5 or not fields[0][0].isdigit() or fields[-1] == "total":
            continue
        calls = int(fields[3])
        errors = int(fields[4]) if len(fields) == 6 else 0
        counts[fields[-1]] = (calls, errors)
    return counts


def count(n, columns, timing=(), rows=None):
    tables = [(label, summary(path)) for label, path in columns]
    names = sorted({name for _, t in tables for name in t},
                   key=lambda name: (-max(t.get(name, (0, 0))[0] for _, t in tables), name))
    if rows:
        # these rows, in this order; every other call in one row
        others = [name for name in names if name not in rows]
        for _, t in tables:
            popped = [t.pop(name, (0, 0)) for name in others]
            t["others"] = (sum(c for c, _ in popped), sum(e for _, e in popped))
        names = rows + ["others"]
    width = max([len(name) + 2 for name in names] + [len("calls per request"), len("  of them failed")]) + 2

    def cell(value, varies=False):
        if not value:
            return f"{'·':>10}"
        shown = str(value) if n == 1 else format(value / n, ".2f")
        return f"{('~' if varies else '') + shown:>10}"

    print(f"{'calls per request':<{width}}" + "".join(f"{'stage ' + label:>10}" for label, _ in tables))
    for name in names:
        print(f"  {name:<{width - 2}}" + "".join(cell(t.get(name, (0, 0))[0], name in timing or "all" in timing) for _, t in tables))
    print(f"  {'total':<{width - 2}}" +
          "".join(cell(sum(c for c, _ in t.values()), "all" in timing or bool(set(timing) & set(t))) for _, t in tables))
    print(f"  {'of them failed':<{width - 2}}" + "".join(cell(sum(e for _, e in t.values()), "all" in timing) for _, t in tables))


SOCKET = re.compile(r"(\d+)<TCP(?:v6)?:\[[^\]]*?:(\d+)->[^\]]*?:(\d+)\]>")
CALL = re.compile(r"^(?:\d+ +)?(\w+)\((.*)\) += (.*)$")


def trace(listen, backend, path):
    def name(match):
        local, remote = match.group(2), match.group(3)
        return "client" if local == listen else "backend" if remote == backend else match.group(0)

    for line in open(path):
        m = CALL.match(line.rstrip("\n"))
        if not m:
            continue
        call, args, result = m.groups()
        args = SOCKET.sub(name, args)
        args = re.sub(r"\d+<pipe:\[\d+\]>", "pipe", args)
        result = re.sub(r" \(Resource temporarily unavailable\)", "", result)
        first = args.split(",")[0]
        if call == "epoll_wait":
            events = "|".join(sorted(set(re.findall(r"events=([A-Z|]+)", args))))
            shown = f"epoll_wait(...)"
            result = f"{result} ({events})" if events else result
        elif call == "epoll_ctl":
            op = re.search(r"EPOLL_CTL_\w+", args).group(0)
            target = args.split(", ")[2]
            events = re.search(r"events=([A-Z|]+)", args)
            shown = f"epoll_ctl({op}, {target}{', ' + events.group(1) if events else ''})"
        elif call == "writev":
            sizes = re.findall(r"iov_len=(\d+)", args)
            shown = f"writev({first}, {' + '.join(sizes)})"
        elif call in ("read", "write", "recvfrom", "sendto"):
            shown = f"{call}({first}, {args.rsplit(', ', 1)[-1]})"
        elif call == "splice":
            parts = args.split(", ")
            shown = f"splice({parts[0]} -> {parts[2]}, {parts[4]})"
        else:
            shown = f"{call}({first}, ...)"
        print(f"  {shown:<44} = {result}")


if __name__ == "__main__":
    if sys.argv[1] == "count":
        args = sys.argv[3:]
        timing, rows = [], None
        while args and args[0] in ("--timing", "--rows"):
            if args[0] == "--timing":
                timing.append(args[1])
            else:
                rows = args[1].split(",")
            args = args[2:]
        count(int(sys.argv[2]), [arg.split("=", 1) for arg in args], timing, rows)
    else:
        trace(sys.argv[2], sys.argv[3], sys.argv[4])
