/* accept_encoding.c -- choosing a content coding and the compressible-type
 * test (see accept_encoding.h). */
#include "accept_encoding.h"

#include <string.h>
#include <strings.h>

/* The spec's default list of compressible media types. */
static const char *const default_types[] = {
    "text/*", "application/json", "application/javascript", "application/x-javascript",
    "application/xml", "application/wasm", "image/svg+xml", "application/*+json",
    "application/*+xml", "application/manifest+json",
};

/* Whether c is a tchar (RFC 9110 5.6.2). */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Whether the n bytes at s are, case-insensitively, the string word. */
static bool is_word(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* Skips spaces and tabs from *i. */
static void skip_ows(const char *s, size_t n, size_t *i)
{
    while (*i < n && (s[*i] == ' ' || s[*i] == '\t'))
        (*i)++;
}

/* Reads a qvalue (RFC 9110 12.4.2) of exactly n bytes at s into *q
 * (thousandths); false if it is not one. */
static bool qvalue(const char *s, size_t n, int *q)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1') || n > 5 || (n > 1 && s[1] != '.'))
        return false;
    int v = (s[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v += (s[i] - '0') * scale;
    }
    if (v > 1000)
        return false;
    *q = v;
    return true;
}

/* Moves *i past a parameter value (a token or a quoted-string, which may
 * hold commas and semicolons) or whatever garbage stands there, up to the
 * next ';' or ',' outside quotes. */
static void skip_value(const char *s, size_t n, size_t *i)
{
    bool quoted = false;
    for (; *i < n; (*i)++) {
        char c = s[*i];
        if (quoted && c == '\\' && *i + 1 < n)
            (*i)++;
        else if (c == '"')
            quoted = !quoted;
        else if (!quoted && (c == ',' || c == ';'))
            return;
    }
}

/* Reads the parameters of one entry from *i (just past its coding) up to
 * its ',' or the end; returns its q (1000 without one), or -1 when the
 * entry is to be ignored (a malformed or out-of-range q, or bytes after
 * the coding that are not parameters). */
static int entry_q(const char *s, size_t n, size_t *i)
{
    int q = 1000;
    bool bad = false;
    for (;;) {
        skip_ows(s, n, i);
        if (*i >= n || s[*i] == ',')
            return bad ? -1 : q;
        if (s[*i] != ';') {
            bad = true;
            skip_value(s, n, i);
            continue;
        }
        (*i)++;
        skip_ows(s, n, i);
        size_t name = *i;
        while (*i < n && is_tchar((unsigned char)s[*i]))
            (*i)++;
        size_t name_end = *i;
        skip_ows(s, n, i);
        if (*i < n && s[*i] == '=') {
            (*i)++;
            skip_ows(s, n, i);
        }
        size_t value = *i;
        skip_value(s, n, i);
        size_t value_end = *i;
        while (value_end > value && (s[value_end - 1] == ' ' || s[value_end - 1] == '\t'))
            value_end--;
        if (is_word(s + name, name_end - name, "q") && !qvalue(s + value, value_end - value, &q))
            bad = true;
    }
}

/* The slot of `*` in accept_encoding_choose's table of q-values. */
#define STAR 4

/* The slot of a coding name: an enum encoding, STAR, or -1 for any other. */
static int coding_of(const char *s, size_t n)
{
    if (is_word(s, n, "br"))
        return ENCODING_BR;
    if (is_word(s, n, "zstd"))
        return ENCODING_ZSTD;
    if (is_word(s, n, "gzip") || is_word(s, n, "x-gzip"))
        return ENCODING_GZIP;
    if (is_word(s, n, "*"))
        return STAR;
    return -1;
}

enum encoding accept_encoding_choose(const char *value, size_t length, unsigned allowed)
{
    if (!value)
        return ENCODING_NONE;
    int q[STAR + 1] = { -1, -1, -1, -1, -1 }; /* -1: not listed; the first listing counts */
    size_t i = 0;
    while (i < length) {
        skip_ows(value, length, &i);
        size_t start = i;
        while (i < length && is_tchar((unsigned char)value[i]))
            i++;
        int coding = coding_of(value + start, i - start);
        int entry = entry_q(value, length, &i);
        if (coding >= 0 && entry >= 0 && q[coding] < 0)
            q[coding] = entry;
        if (i < length) /* the ',' */
            i++;
    }
    /* In order of preference, so that a tie keeps the earlier one. */
    static const enum encoding order[] = { ENCODING_BR, ENCODING_ZSTD, ENCODING_GZIP };
    enum encoding best = ENCODING_NONE;
    int best_q = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        enum encoding c = order[k];
        int cq = q[c] >= 0 ? q[c] : q[STAR];
        if ((allowed & ENCODING_BIT(c)) && cq > best_q) {
            best = c;
            best_q = cq;
        }
    }
    return best;
}

const char *encoding_file_suffix(enum encoding encoding)
{
    switch (encoding) {
    case ENCODING_BR: return ".br";
    case ENCODING_ZSTD: return ".zst";
    case ENCODING_GZIP: return ".gz";
    default: return NULL;
    }
}

const char *encoding_etag_suffix(enum encoding encoding)
{
    switch (encoding) {
    case ENCODING_BR: return "-br";
    case ENCODING_ZSTD: return "-zst";
    case ENCODING_GZIP: return "-gz";
    default: return NULL;
    }
}

/* Whether the media type type/sub (type_len and sub_len bytes) matches the
 * NUL-terminated pattern. */
static bool pattern_matches(const char *pattern, const char *type, size_t type_len,
                            const char *sub, size_t sub_len)
{
    const char *slash = strchr(pattern, '/');
    if (!slash)
        return false;
    size_t ptype = (size_t)(slash - pattern);
    if (!(ptype == 1 && pattern[0] == '*') &&
        !(ptype == type_len && strncasecmp(pattern, type, type_len) == 0))
        return false;
    const char *psub = slash + 1;
    size_t psub_len = strlen(psub);
    if (psub[0] != '*')
        return psub_len == sub_len && strncasecmp(psub, sub, sub_len) == 0;
    /* "*" alone: any subtype; "*+json": a subtype with something before the suffix */
    size_t suffix = psub_len - 1;
    return sub_len > suffix && strncasecmp(psub + 1, sub + sub_len - suffix, suffix) == 0;
}

bool media_type_compressible(const char *content_type, size_t length, char **types, size_t count)
{
    size_t i = 0;
    skip_ows(content_type, length, &i);
    size_t type = i;
    while (i < length && is_tchar((unsigned char)content_type[i]))
        i++;
    size_t type_len = i - type;
    if (type_len == 0 || i >= length || content_type[i] != '/')
        return false;
    size_t sub = ++i;
    while (i < length && is_tchar((unsigned char)content_type[i]))
        i++;
    size_t sub_len = i - sub;
    skip_ows(content_type, length, &i);
    if (sub_len == 0 || (i < length && content_type[i] != ';'))
        return false;
    const char *const *list = count ? (const char *const *)types : default_types;
    size_t n = count ? count : sizeof default_types / sizeof default_types[0];
    for (size_t k = 0; k < n; k++)
        if (pattern_matches(list[k], content_type + type, type_len, content_type + sub, sub_len))
            return true;
    return false;
}
