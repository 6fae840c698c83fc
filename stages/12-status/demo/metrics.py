#!/usr/bin/env python3
"""metrics.py STATUS_PORT FAMILY... -- reads
http://127.0.0.1:STATUS_PORT/metrics and prints the lines of each FAMILY
named, as rsp wrote them (# HELP, # TYPE, then the samples), except
that a family's samples are sorted: rsp lists sites in the order of the
config's `sites` table, and LuaJIT walks a table's keys in an order that
changes from run to run."""
import sys
import urllib.request

port, wanted = int(sys.argv[1]), sys.argv[2:]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
    lines = answer.read().decode().splitlines()
for family in wanted:
    comments = [line for line in lines if line.split(" ")[:3] in (["#", "HELP", family], ["#", "TYPE", family])]
    samples = [line for line in lines if line.startswith(family + "{") or line.startswith(family + " ")]
    print("\n".join(comments + sorted(samples)))
