"""A strict parser of the Prometheus text exposition format 0.0.4 (stage 11's
/metrics), with the standard library only.

    families = parse(text)
    families["rsp_bytes_total"] == {"help": "...", "type": "counter",
                                    "samples": {frozenset({("direction", "in")}): 123.0, ...}}
    value(families, "rsp_bytes_total", direction="in") == 123.0

What it accepts (https://prometheus.io/docs/instrumenting/exposition_formats/):

    # HELP name text          text: any characters, escapes \\ and \n only
    # TYPE name counter|gauge|histogram|summary|untyped
    # anything else           a comment, ignored
    name{label="value",...} number [timestamp]
    (empty lines are ignored)

and what it rejects, raising PromParseError("line N: ...") (line numbers
from 1): a metric name not matching [a-zA-Z_:][a-zA-Z0-9_:]*, a label name
not matching [a-zA-Z_][a-zA-Z0-9_]* (or starting with __, reserved), the
same label twice in a sample, a label value with an escape other than
\\, \" and \n (or not UTF-8), a malformed number (floats as Go's
ParseFloat writes them, +Inf, -Inf, NaN) or timestamp (an integer of
milliseconds), a HELP or TYPE line given twice for a family or after its
first sample, the samples of a family not contiguous (another family's
line in between), a family of TYPE counter whose name does not end in
_total (rsp's convention, as OpenMetrics wants), the same (name, label
set) twice, a carriage return, and a document not ending in a newline.

A sample belongs to the family of its name; for a histogram or summary
family NAME, also NAME_bucket / NAME_sum / NAME_count (those samples'
keys then include the pair ("__name__", sample name)). Samples are keyed
by frozenset(labels.items()); values are floats.
"""

import math
import re

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# A float as Go's strconv.ParseFloat (which Prometheus uses) reads it,
# without the hexadecimal and underscore forms nobody writes in an exposition.
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
SPECIAL_VALUES = {"+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf, "NaN": math.nan}
TIMESTAMP = re.compile(r"-?[0-9]+")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
BLANKS = " \t"


class PromParseError(ValueError):
    """What is wrong with an exposition, and on which line (from 1)."""

    def __init__(self, lineno, message, line=None):
        self.lineno = lineno
        text = f"line {lineno}: {message}"
        if line is not None:
            text += f": {line!r}"
        super().__init__(text)


def _unescape(text, allowed, lineno, what):
    """`text` with its backslash escapes resolved; `allowed` maps the
    character after a backslash to what it stands for."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise PromParseError(lineno, f"{what} ends in a lone backslash")
            nxt = text[i + 1]
            if nxt not in allowed:
                raise PromParseError(lineno, f"invalid escape \\{nxt} in {what} (only "
                                     + ", ".join("\\" + k for k in allowed) + ")")
            out.append(allowed[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _number(text, lineno):
    if text in SPECIAL_VALUES:
        return SPECIAL_VALUES[text]
    if not NUMBER.fullmatch(text):
        raise PromParseError(lineno, f"not a number: {text!r}")
    return float(text)


class _Cursor:
    """A position in one sample line."""

    def __init__(self, line, lineno):
        self.line, self.lineno, self.at = line, lineno, 0

    def error(self, message):
        raise PromParseError(self.lineno, f"{message} at column {self.at + 1}", self.line)

    def peek(self):
        return self.line[self.at] if self.at < len(self.line) else ""

    def skip_blanks(self):
        while self.peek() and self.peek() in BLANKS:
            self.at += 1

    def expect(self, char):
        if self.peek() != char:
            self.error(f"expected {char!r}, found {self.peek() or 'the end of the line'!r}")
        self.at += 1

    def match(self, pattern, what):
        m = pattern.match(self.line, self.at)
        if not m:
            self.error(f"expected {what}")
        self.at = m.end()
        return m.group()

    def label_value(self):
        """A quoted label value (the cursor on its opening quote), unescaped."""
        self.expect('"')
        start = self.at
        while True:
            c = self.peek()
            if c == "":
                self.error("unterminated label value")
            if c == "\\":
                self.at += 2
                continue
            if c == '"':
                break
            self.at += 1
        raw = self.line[start:self.at]
        self.at += 1
        return _unescape(raw, {"\\": "\\", '"': '"', "n": "\n"}, self.lineno, "a label value")


def _parse_sample(line, lineno):
    """(name, {label: value}, float value) of one sample line."""
    cur = _Cursor(line, lineno)
    name = cur.match(METRIC_NAME, "a metric name")
    labels = {}
    after_name = cur.at
    cur.skip_blanks()
    if cur.peek() != "{":
        cur.at = after_name
    else:
        cur.at += 1
        cur.skip_blanks()
        while cur.peek() != "}":
            label = cur.match(LABEL_NAME, "a label name")
            if label.startswith("__"):
                cur.error(f"label name {label!r} starts with __ (reserved)")
            if label in labels:
                cur.error(f"label {label!r} given twice")
            cur.skip_blanks()
            cur.expect("=")
            cur.skip_blanks()
            labels[label] = cur.label_value()
            cur.skip_blanks()
            if cur.peek() == ",":
                cur.at += 1
                cur.skip_blanks()
            elif cur.peek() != "}":
                cur.error("expected ',' or '}' after a label")
        cur.at += 1
    if not line[cur.at:cur.at + 1] or line[cur.at] not in BLANKS:
        cur.error("expected a blank before the value")
    fields = re.split(r"[ \t]+", line[cur.at:].strip(BLANKS))
    if not 1 <= len(fields) <= 2:
        cur.error(f"expected a value and at most a timestamp, got {len(fields)} field(s)")
    value = _number(fields[0], lineno)
    if len(fields) == 2 and not TIMESTAMP.fullmatch(fields[1]):
        cur.error(f"not a timestamp (integer milliseconds): {fields[1]!r}")
    return name, labels, value


def _family_of(name, families, current):
    """The family a sample called `name` belongs to: `current` (the family
    being read) if it is that family's own name or one of its type's
    suffixes, else a family called `name`."""
    if current is not None:
        if name == current:
            return current
        kind = families[current]["type"]
        if any(name == current + suffix for suffix in SUFFIXES.get(kind, ())):
            return current
    return name


def parse(text):
    """The families of an exposition (a str): {name: {"help": str or None,
    "type": str or None, "samples": {frozenset(labels.items()): float}}}.
    Raises PromParseError naming the line on anything malformed."""
    if not isinstance(text, str):
        raise TypeError("parse() takes the exposition as a str")
    if "\r" in text:
        lineno = text[:text.index("\r")].count("\n") + 1
        raise PromParseError(lineno, "carriage return (lines end with \\n alone)")
    if text and not text.endswith("\n"):
        raise PromParseError(text.count("\n") + 1, "the document does not end with a newline")
    families = {}
    closed = set()      # families whose lines are over: none may come again
    current = None      # the family whose lines are being read
    has_samples = set()

    def enter(name, lineno, line):
        """Makes `name` the current family (creating it), checking that its
        lines are contiguous."""
        nonlocal current
        if name == current:
            return families[name]
        if name in closed:
            raise PromParseError(lineno, f"family {name!r} continues after other families' lines "
                                 "(a family's lines must be contiguous)", line)
        if current is not None:
            closed.add(current)
        current = name
        return families.setdefault(name, {"help": None, "type": None, "samples": {}})

    for lineno, line in enumerate(text.split("\n")[:-1] if text else [], start=1):
        if line.strip(BLANKS) == "":
            continue
        if line.startswith("#"):
            body = line[1:].lstrip(BLANKS)
            keyword = body[:4]
            if (line[1:2] not in tuple(BLANKS) or keyword not in ("HELP", "TYPE")
                    or body[4:5] not in tuple(BLANKS)):
                continue  # a comment (also "#HELP x" and "# HELPER x")
            rest = body[4:].lstrip(BLANKS)
            m = METRIC_NAME.match(rest)
            if not m:
                raise PromParseError(lineno, f"{keyword} without a valid metric name", line)
            name = m.group()
            after = rest[m.end():]
            if after and after[0] not in BLANKS:
                raise PromParseError(lineno, f"invalid metric name in {keyword}", line)
            after = after.lstrip(BLANKS)
            family = enter(name, lineno, line)
            if name in has_samples:
                raise PromParseError(lineno, f"{keyword} for {name!r} after its samples", line)
            if keyword == "HELP":
                if family["help"] is not None:
                    raise PromParseError(lineno, f"a second HELP for {name!r}", line)
                family["help"] = _unescape(after, {"\\": "\\", "n": "\n"}, lineno, "HELP text")
            else:
                if family["type"] is not None:
                    raise PromParseError(lineno, f"a second TYPE for {name!r}", line)
                kind = after.rstrip(BLANKS)
                if kind not in TYPES:
                    raise PromParseError(lineno, f"unknown TYPE {kind!r} (one of {', '.join(TYPES)})", line)
                if kind == "counter" and not name.endswith("_total"):
                    raise PromParseError(lineno, f"counter {name!r} does not end in _total", line)
                family["type"] = kind
            continue
        if line[0] in BLANKS:
            raise PromParseError(lineno, "a sample line starts with a blank", line)
        name, labels, value = _parse_sample(line, lineno)
        family_name = _family_of(name, families, current)
        family = enter(family_name, lineno, line)
        has_samples.add(family_name)
        key_labels = dict(labels)
        if name != family_name:
            key_labels["__name__"] = name
        key = frozenset(key_labels.items())
        if key in family["samples"]:
            raise PromParseError(lineno, f"duplicate sample {name}{_labels_text(labels)}", line)
        family["samples"][key] = value
    return families


def _labels_text(labels):
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def escape_label_value(value):
    """A label value as the format writes it between quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def value(families, name, **labels):
    """The value of the sample of family `name` with exactly these labels;
    fails (AssertionError) if there is none."""
    assert name in families, f"no family {name!r} in the exposition (families: {sorted(families)})"
    key = frozenset(labels.items())
    samples = families[name]["samples"]
    assert key in samples, (f"no sample {name}{_labels_text(labels)}; it has "
                            + ", ".join(name + _labels_text(dict(k)) for k in samples))
    return samples[key]


def samples(families, name):
    """[(labels dict, value)] of family `name`."""
    assert name in families, f"no family {name!r} in the exposition (families: {sorted(families)})"
    return [(dict(k), v) for k, v in families[name]["samples"].items()]
