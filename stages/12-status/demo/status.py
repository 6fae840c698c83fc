#!/usr/bin/env python3
"""status.py STATUS_PORT -- reads
http://127.0.0.1:STATUS_PORT/status.json and prints some of its fields, a
line each: the gauges and totals, the sites and their status codes, and
each backend of each pool (sites and pools sorted by name: rsp lists
them in the order of the config's tables, and LuaJIT walks a table's keys
in an order that changes from run to run)."""
import json
import sys
import urllib.request

port = int(sys.argv[1])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10) as answer:
    s = json.load(answer)


def flat(d):
    return ", ".join(f"{k} {v}" for k, v in d.items())


print(f"generation {s['generation']}, "
      f"connections {s['connections']}, requests_in_flight {s['requests_in_flight']}")
print(f"requests_total {s['requests_total']}: {flat(s['requests_by_class'])}")
print(f"timeouts: {flat(s['timeouts'])}")
print(f"bytes: in {s['bytes']['in']}, out {s['bytes']['out']}")
for site in sorted(s["sites"], key=lambda site: site["name"]):
    n = site["requests"]
    print(f"site {site['name']}: {n} request{'' if n == 1 else 's'}: {flat(site['codes']) or 'none yet'}")
for pool in sorted(s["pools"], key=lambda pool: pool["name"]):
    for b in pool["backends"]:
        print(f"pool {pool['name']}, backend {b['name']}: {'up' if b['up'] else 'down'} "
              f"(passive {b['passive_health']}, active {b['active_health']}), "
              f"{b['requests']} requests, {b['failures']} failures")
