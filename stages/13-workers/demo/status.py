#!/usr/bin/env python3
"""status.py STATUS_PORT workers -- reads
http://127.0.0.1:STATUS_PORT/status.json and prints, on one line,
requests_total and the workers: configured, their pids, restarts.
(Chapter 12's demo/status.py prints the rest of the document.)"""
import json
import sys
import urllib.request

port = int(sys.argv[1])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10) as answer:
    s = json.load(answer)
w = s["workers"]
print(f"status.json: requests_total {s['requests_total']}; workers: configured {w['configured']}, "
      f"pids {w['pids']}, restarts {w['restarts']}")
