#!/usr/bin/env python3
"""log.py FILE [SKIP] -- rsp's log lines in FILE after the first SKIP
lines, without their timestamps, grouped by the process that wrote them:
the master's first (in the order it wrote them), then worker 1's, worker
2's, ... Processes write to the log at the same time, so the order
between two processes' lines may differ from run to run; within one
process it does not. In the master's lines, a run of lines about
workers ending ("worker N (pid P) ...") is put in the order of N, since
which worker the master reaps first is up to the kernel."""
import re
import sys

path, skip = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
with open(path, errors="replace") as f:
    lines = [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line.rstrip("\n")) for line in f][skip:]
ENDED = re.compile(r"^rsp: worker (\d+) \(pid \d+\) ")


def process(line):
    m = re.match(r"^rsp: worker (\d+): ", line)
    return int(m.group(1)) if m else 0


ordered = []
for p in sorted({process(line) for line in lines}):
    mine = [line for line in lines if process(line) == p]
    i = 0
    while i < len(mine):
        j = i
        while j < len(mine) and ENDED.match(mine[j]):
            j += 1
        if j > i:
            ordered += sorted(mine[i:j], key=lambda line: int(ENDED.match(line).group(1)))
            i = j
        else:
            ordered.append(mine[i])
            i += 1
print("\n".join(ordered))
