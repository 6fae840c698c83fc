#!/usr/bin/env python3
"""page.py STATUS_PORT -- reads the status page (GET / from the status
listener on 127.0.0.1:STATUS_PORT) and says what it is made of: its size,
whether it holds a script or loads anything (src=, href= or url( to
another place; <link>), its meta tags, the SVG's points, and each backend
row (data-backend, data-state)."""
import html.parser
import sys
import urllib.request

port = int(sys.argv[1])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
    kind = answer.headers["Content-Type"]
    text = answer.read().decode()


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.outside, self.meta, self.points, self.backends = [], [], [], 0, []
        self.pool = None
        self.in_h3 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        for name in ("src", "href"):
            if name in a and not a[name].startswith("/"):
                self.outside.append(a[name])
        if tag == "meta" and "charset" not in a:
            self.meta.append(f"{a.get('name') or a.get('http-equiv')}={a['content']}")
        if tag == "polyline":
            self.points = len(a["points"].split())
        if tag == "h3":
            self.in_h3 = True
        if tag == "tr" and "data-backend" in a:
            self.backends.append((self.pool, a["data-backend"], a["data-state"]))

    def handle_endtag(self, tag):
        if tag == "h3":
            self.in_h3 = False

    def handle_data(self, data):
        if self.in_h3 and data.startswith("pool "):
            self.pool = data[5:].strip()


page = Page()
page.feed(text)
print(f"{kind}, {len(text.encode())} bytes; <script>: {page.tags.count('script')}, <link>: "
      f"{page.tags.count('link')}, <img>: {page.tags.count('img')}, links elsewhere: {len(page.outside)}, "
      f"url(: {text.count('url(')}")
print("meta: " + ", ".join(page.meta))
svg = "yes" if '<svg id="rps"' in text else "no"
print(f"svg#rps: {svg}, a polyline of {page.points} points (one a second)")
for pool, backend, state in page.backends:
    print(f"pool {pool}: backend {backend} data-state={state}")
