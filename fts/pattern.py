"""Deterministic test data, shared by the backends and the tests.

pattern(length) is the body a backend's /bytes?n=N sends. Its period (64256
bytes) is not a power of two, so a dropped or repeated buffer of any usual
size (4 KiB, 16 KiB, 64 KiB) shows up as a content mismatch, not only as a
wrong length.

Never compare large bodies with a bare `assert a == b`: pytest would try to
print a diff of megabytes. Use the assert_* helpers below; their messages
give the lengths and the first differing offset.
"""

PERIOD = 251 * 256
_BLOCK = bytes(((7 * i + i // 251) & 0xFF) for i in range(PERIOD))

# Chunks handed out by pattern_chunks() are a whole number of periods long,
# so every chunk is the same object and costs nothing to produce.
_CHUNK = _BLOCK * 4


def pattern(length, offset=0):
    """The `length` pattern bytes starting at `offset`."""
    start = offset % PERIOD
    repeats = (start + length) // PERIOD + 1
    return (_BLOCK * repeats)[start:start + length]


def pattern_chunks(length):
    """pattern(length), as a sequence of chunks (for streaming it out)."""
    full, rest = divmod(length, len(_CHUNK))
    for _ in range(full):
        yield _CHUNK
    if rest:
        yield _CHUNK[:rest]


def first_difference(actual, expected):
    """Offset of the first differing byte of two byte strings, or None."""
    n = min(len(actual), len(expected))
    if actual[:n] == expected[:n]:
        return None if len(actual) == len(expected) else n
    lo, hi = 0, n  # the first difference is in actual[lo:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if actual[lo:mid] == expected[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def assert_same_bytes(actual, expected, what="body"):
    """Fails with a short message (lengths, first differing offset)."""
    if actual == expected:
        return
    at = first_difference(actual, expected)
    raise AssertionError(
        f"{what}: got {len(actual)} bytes, expected {len(expected)}; "
        f"first difference at offset {at}"
    )


def assert_is_pattern(data, length, what="body"):
    """data must be exactly pattern(length)."""
    assert_same_bytes(data, pattern(length), what)


def assert_is_pattern_prefix(data, what="body"):
    """data must be the start of the pattern (a truncated but uncorrupted body)."""
    assert_same_bytes(data, pattern(len(data)), what)
