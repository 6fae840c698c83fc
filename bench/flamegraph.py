#!/usr/bin/python3
"""bench/flamegraph.py -- fold `perf script` output into stacks and draw a
flame graph as a self-contained SVG; our own small version of Brendan
Gregg's stackcollapse-perf.pl and flamegraph.pl (which Debian does not
package), with no dependency beyond Python's standard library.

    perf script -i perf.data --no-inline -F comm,ip,sym,dso | bench/flamegraph.py fold > stacks.folded
    bench/flamegraph.py svg stacks.folded -o profile.svg --title "rsp, keep-alive"

or, in one go:

    perf script -i perf.data --no-inline -F comm,ip,sym,dso | bench/flamegraph.py svg - -o profile.svg

The folded format is the usual one: one line per distinct stack, frames
from the root to the leaf separated by ';', then a space and the number
of samples; kernel frames end in `_[k]`. bench/flamegraph (the recipe)
imports this file for fold(), render_svg() and summarize().

In the SVG every box is a function; its width is the share of samples in
which it was on the stack; boxes stacked on it are what it called. Boxes
are coloured by where the code lives: the kernel (orange), the program
profiled (green), the C library (yellow), OpenSSL (blue), LuaJIT
(purple), anything else (grey). Hovering over a box shows its name,
samples and share; clicking one zooms to it (click the bottom bar to
come back).
"""

import argparse
import html
import re
import sys
import zlib

FRAME = re.compile(r"^\s+([0-9a-fA-F]+)\s+(.*?)\s+\((.*)\)\s*$")
OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")

KINDS = {  # kind: (label, hue range, saturation, lightness)
    "kernel": ("kernel", (15, 40), 85, 60),
    "program": ("the program", (95, 135), 55, 52),
    "libc": ("C library", (48, 58), 85, 58),
    "ssl": ("OpenSSL", (195, 220), 60, 62),
    "lua": ("LuaJIT", (265, 290), 45, 66),
    "other": ("other / unknown", (0, 0), 0, 72),
}


def frame_kind(name, dso, program):
    if name.endswith("_[k]") or dso.startswith("[kernel"):
        return "kernel"
    base = dso.rsplit("/", 1)[-1]
    if program and base == program:
        return "program"
    if base.startswith(("libc.so", "libc-", "ld-linux", "libm.so", "libpthread")):
        return "libc"
    if base.startswith(("libssl", "libcrypto")):
        return "ssl"
    if base.startswith("libluajit"):
        return "lua"
    return "other"


def fold(lines, program=None, with_comm=True):
    """Reads `perf script` output (with call chains); returns (stacks,
    kinds): stacks maps a tuple of frame names, root first, to its number
    of samples; kinds maps a frame name to its kind (see KINDS). `program`:
    the file name of the profiled binary, whose frames are 'program'."""
    stacks, kinds = {}, {}
    comm, frames = None, []

    def flush():
        if comm is None:
            return
        chain = [f for f in reversed(frames)]
        if with_comm:
            chain.insert(0, comm)
            kinds.setdefault(comm, "other")
        key = tuple(chain)
        stacks[key] = stacks.get(key, 0) + 1

    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        m = FRAME.match(line)
        if m and comm is not None:
            _, sym, dso = m.groups()
            sym = OFFSET.sub("", sym)
            if sym == "[unknown]":
                base = dso.rsplit("/", 1)[-1]
                sym = f"[{base}]" if base and base != "[unknown]" else "[unknown]"
            kernel = dso.startswith("[kernel") or dso.endswith(".ko") or dso.startswith("[") and "kallsyms" in dso
            name = sym + "_[k]" if kernel else sym
            frames.append(name)
            kinds.setdefault(name, "kernel" if kernel else frame_kind(name, dso, program))
        elif not line.startswith((" ", "\t")):
            flush()
            comm, frames = line.split()[0] if line.split() else "?", []
    flush()
    return stacks, kinds


def write_folded(stacks, out):
    for chain, count in sorted(stacks.items()):
        out.write(";".join(f.replace(";", ":") for f in chain) + f" {count}\n")


def read_folded(lines):
    stacks, kinds = {}, {}
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        chain, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        key = tuple(chain.split(";"))
        stacks[key] = stacks.get(key, 0) + n
        for f in key:
            kinds.setdefault(f, "kernel" if f.endswith("_[k]") else "other")
    return stacks, kinds


# ------------------------------------------------------------------ the tree

class Node:
    __slots__ = ("name", "total", "children")

    def __init__(self, name):
        self.name, self.total, self.children = name, 0, {}


def build_tree(stacks):
    root = Node("all")
    for chain, count in stacks.items():
        root.total += count
        node = root
        for name in chain:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = Node(name)
            child.total += count
            node = child
    return root


def color(name, kind):
    _, (h0, h1), s, l = KINDS.get(kind, KINDS["other"])
    v = zlib.crc32(name.encode()) & 0xFFFF
    h = h0 + (h1 - h0) * (v / 0xFFFF)
    l2 = l + ((v >> 4) % 9) - 4
    return f"hsl({h:.0f},{s}%,{l2}%)"


def render_svg(stacks, kinds, title="Flame graph", subtitle="", width=1200, frame_height=16, min_width=0.1):
    """The SVG text of a flame graph of stacks (see fold())."""
    root = build_tree(stacks)
    total = max(root.total, 1)
    depth = [0]

    def measure(node, d):
        depth[0] = max(depth[0], d)
        for child in node.children.values():
            if child.total / total * (width - 20) >= min_width:
                measure(child, d + 1)

    measure(root, 0)
    top_margin, bottom_margin = 58, 40
    height = top_margin + (depth[0] + 1) * frame_height + bottom_margin
    inner = width - 20
    rects = []

    def place(node, x, d):
        w = node.total / total * inner
        if w < min_width:
            return
        y = height - bottom_margin - (d + 1) * frame_height
        kind = kinds.get(node.name, "other") if d > 0 else "other"
        label = node.name
        pct = node.total * 100 / total
        tip = f"{label} ({node.total:,} samples, {pct:.2f} %)"
        fill = color(label, kind) if d > 0 else "hsl(0,0%,80%)"
        chars = int((w - 6) / 6.6)
        text = label if len(label) <= chars else (label[:max(chars - 2, 0)] + ".." if chars >= 4 else "")
        rects.append(
            f'<g class="f" data-x="{x:.3f}" data-w="{w:.3f}" data-d="{d}"><title>{html.escape(tip)}</title>'
            f'<rect x="{10 + x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" height="{frame_height - 1}" '
            f'fill="{fill}" rx="2"/>'
            f'<text x="{13 + x:.2f}" y="{y + frame_height - 4.5}">{html.escape(text)}</text></g>')
        cx = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            place(child, cx, d + 1)
            cx += child.total / total * inner

    place(root, 0.0, 0)
    legend = []
    lx = 10
    used = {kinds.get(n, "other") for chain in stacks for n in chain}
    for kind, (label, _, _, _) in KINDS.items():
        if kind not in used:
            continue
        legend.append(f'<rect x="{lx}" y="{height - 22}" width="12" height="12" fill="{color(label, kind)}"/>'
                      f'<text x="{lx + 16}" y="{height - 12}">{html.escape(label)}</text>')
        lx += 24 + 7 * len(label)
    script = """
<script><![CDATA[
(function () {
  var W = %(inner)s, groups = document.querySelectorAll('g.f');
  function zoom(g) {
    var x0 = parseFloat(g.getAttribute('data-x')), w0 = parseFloat(g.getAttribute('data-w'));
    var d0 = parseInt(g.getAttribute('data-d'));
    var scale = W / w0;
    for (var i = 0; i < groups.length; i++) {
      var e = groups[i], x = parseFloat(e.getAttribute('data-x')), w = parseFloat(e.getAttribute('data-w'));
      var d = parseInt(e.getAttribute('data-d'));
      var r = e.querySelector('rect'), t = e.querySelector('text');
      var inside = d >= d0 ? (x >= x0 - 1e-6 && x + w <= x0 + w0 + 1e-6) : (x <= x0 + 1e-6 && x + w >= x0 + w0 - 1e-6);
      if (!inside) { e.style.display = 'none'; continue; }
      e.style.display = '';
      var nx = d >= d0 ? (x - x0) * scale : 0, nw = d >= d0 ? w * scale : W;
      r.setAttribute('x', 10 + nx); r.setAttribute('width', Math.max(nw - 0.5, 0.1));
      t.setAttribute('x', 13 + nx);
      var name = e.querySelector('title').textContent.replace(/ \\([0-9,]+ samples.*$/, '');
      var chars = Math.floor((nw - 6) / 6.6);
      t.textContent = name.length <= chars ? name : (chars >= 4 ? name.slice(0, chars - 2) + '..' : '');
    }
  }
  for (var i = 0; i < groups.length; i++)
    groups[i].addEventListener('click', function (ev) { zoom(ev.currentTarget); });
})();
]]></script>""" % {"inner": inner}
    return f"""<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
<style>
  text {{ font-family: Verdana, sans-serif; font-size: 11px; fill: #000; pointer-events: none; }}
  g.f:hover rect {{ stroke: #000; stroke-width: 0.6; cursor: pointer; }}
  .title {{ font-size: 16px; }} .sub {{ font-size: 11px; fill: #444; }}
</style>
<rect x="0" y="0" width="{width}" height="{height}" fill="#fbfbf7"/>
<text class="title" x="{width / 2}" y="22" text-anchor="middle">{html.escape(title)}</text>
<text class="sub" x="{width / 2}" y="40" text-anchor="middle">{html.escape(subtitle)}</text>
{chr(10).join(rects)}
{chr(10).join(legend)}
<text class="sub" x="{width - 10}" y="{height - 12}" text-anchor="end">{total:,} samples; width = share of samples on the stack; click a box to zoom, the bottom one to come back</text>
{script}
</svg>
"""


# -------------------------------------------------------------- the summary

SYSCALL_ENTRY = re.compile(r"^(?:(?:__x64_sys_|__se_sys_|__do_sys_|__ia32_sys_|ksys_)(\w+?)|do_(writev|readv))"
                           r"(?:_\[k\])?$")


def syscall_of(name):
    """The system call a kernel frame is the entry of, or None. writev and
    readv often have no __x64_sys_* frame of their own in the unwound stack
    (the kernel's dispatch inlines it): their do_writev/do_readv stands in."""
    m = SYSCALL_ENTRY.match(name)
    return (m.group(1) or m.group(2)) if m else None


def summarize(stacks, kinds, program_functions=None):
    """Shares of the samples: by kind of code at the leaf (self time); the
    functions of the program, self and inclusive; and the kernel's time
    under each system call (inclusive, from the __x64_sys_* frame) and in
    softirq network processing."""
    total = sum(stacks.values()) or 1
    by_kind, self_time, inclusive, syscalls = {}, {}, {}, {}
    softirq = 0
    for chain, count in stacks.items():
        leaf = chain[-1] if chain else "?"
        kind = kinds.get(leaf, "other")
        by_kind[kind] = by_kind.get(kind, 0) + count
        self_time[leaf] = self_time.get(leaf, 0) + count
        seen = set()
        call = None
        for name in chain:
            if name not in seen:
                inclusive[name] = inclusive.get(name, 0) + count
                seen.add(name)
            if call is None:
                call = syscall_of(name)
        if call:
            syscalls[call] = syscalls.get(call, 0) + count
        if any(n.startswith(("__do_softirq", "net_rx_action", "do_softirq")) for n in chain):
            softirq += count
    program = {n: (self_time.get(n, 0), inclusive[n]) for n in inclusive if kinds.get(n) == "program"}
    # Where the system calls come from: the program's frames on the way to
    # each call, without those on (nearly) every stack (main, the loop).
    everywhere = {n for n, v in inclusive.items() if v >= 0.9 * total}
    sites = {}
    for chain, count in stacks.items():
        call = next((syscall_of(n) for n in chain if syscall_of(n)), None)
        if not call:
            continue
        path = tuple(n for n in chain if kinds.get(n) == "program" and n not in everywhere)
        sites[(path, call)] = sites.get((path, call), 0) + count
    return {"total": total, "by_kind": by_kind, "self": self_time, "inclusive": inclusive,
            "program": program, "syscalls": syscalls, "softirq": softirq, "sites": sites}


def main(argv):
    p = argparse.ArgumentParser(prog="bench/flamegraph.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fold", help="perf script output (stdin) -> folded stacks (stdout)")
    f.add_argument("--program", help="file name of the profiled binary (its frames are coloured green)")
    f.add_argument("--no-comm", action="store_true", help="no process name at the root of each stack")
    s = sub.add_parser("svg", help="folded stacks or perf script output -> SVG")
    s.add_argument("input", help="a file, or - for stdin; perf script output is recognised and folded first")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--title", default="Flame graph")
    s.add_argument("--subtitle", default="")
    s.add_argument("--program", help="file name of the profiled binary")
    s.add_argument("--width", type=int, default=1200)
    args = p.parse_args(argv)
    if args.command == "fold":
        stacks, _ = fold(sys.stdin, args.program, not args.no_comm)
        write_folded(stacks, sys.stdout)
        return 0
    lines = (sys.stdin if args.input == "-" else open(args.input)).read().splitlines()
    if any(FRAME.match(line) for line in lines[:200]):
        stacks, kinds = fold(lines, args.program)
    else:
        stacks, kinds = read_folded(lines)
    with open(args.output, "w") as out:
        out.write(render_svg(stacks, kinds, args.title, args.subtitle, args.width))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
