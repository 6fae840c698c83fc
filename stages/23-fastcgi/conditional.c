/* conditional.c -- ETags, If-* evaluation, Range and If-Range (see
 * conditional.h). */
#include "conditional.h"

#include "http_date.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t etag_format(char out[ETAG_SIZE], time_t mtime, uint64_t size, const char *suffix)
{
    /* mtime as its two's-complement bits: a file from before 1970 still
     * gets a tag of hex digits only. */
    int n = snprintf(out, ETAG_SIZE, "\"%llx-%llx%.8s\"", (unsigned long long)(uint64_t)mtime,
                     (unsigned long long)size, suffix ? suffix : "");
    return n < 0 ? 0 : (size_t)n;
}

/* Skips spaces and tabs from *i. */
static void skip_ows(const char *s, size_t n, size_t *i)
{
    while (*i < n && (s[*i] == ' ' || s[*i] == '\t'))
        (*i)++;
}

/* Whether c may stand inside an entity-tag's quotes (etagc). */
static bool is_etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

/* Reads the entity-tag at *i (W/ then a quoted opaque-tag); returns its
 * length and sets *weak, or 0 (and *i unspecified) if there is none. */
static size_t entity_tag(const char *s, size_t n, size_t *i, bool *weak)
{
    size_t start = *i;
    *weak = n - *i >= 2 && s[*i] == 'W' && s[*i + 1] == '/';
    if (*weak)
        *i += 2;
    if (*i >= n || s[*i] != '"')
        return 0;
    for ((*i)++; *i < n && is_etagc((unsigned char)s[*i]); (*i)++)
        ;
    if (*i >= n || s[*i] != '"')
        return 0;
    (*i)++;
    return *i - start;
}

/* Whether two entity-tags match: strongly (both strong, same opaque-tag)
 * or weakly (same opaque-tag). */
static bool tags_match(const char *a, size_t a_len, const char *b, size_t b_len, bool weak)
{
    bool a_weak = a_len >= 2 && a[0] == 'W' && a[1] == '/';
    bool b_weak = b_len >= 2 && b[0] == 'W' && b[1] == '/';
    if (!weak && (a_weak || b_weak))
        return false;
    if (a_weak) {
        a += 2;
        a_len -= 2;
    }
    if (b_weak) {
        b += 2;
        b_len -= 2;
    }
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

bool etag_list_match(const char *list, size_t length, const char *etag, size_t etag_length,
                     bool weak)
{
    size_t i = 0;
    skip_ows(list, length, &i);
    size_t end = length;
    while (end > i && (list[end - 1] == ' ' || list[end - 1] == '\t'))
        end--;
    if (end - i == 1 && list[i] == '*')
        return true;
    while (i < length) {
        skip_ows(list, length, &i);
        if (i < length && list[i] == ',') { /* an empty element */
            i++;
            continue;
        }
        if (i >= length)
            break;
        size_t start = i;
        bool tag_weak;
        size_t tag_length = entity_tag(list, length, &i, &tag_weak);
        if (tag_length == 0)
            return false;
        if (tags_match(list + start, tag_length, etag, etag_length, weak))
            return true;
        skip_ows(list, length, &i);
        if (i < length && list[i] != ',')
            return false;
        i++;
    }
    return false;
}

enum conditional_outcome conditional_evaluate(const struct conditional_headers *h,
                                              bool get_or_head, const char *etag,
                                              size_t etag_length, time_t mtime)
{
    time_t date;
    if (h->if_match) {
        if (!etag_list_match(h->if_match, h->if_match_length, etag, etag_length, false))
            return CONDITIONAL_PRECONDITION_FAILED;
    } else if (h->if_unmodified_since &&
               http_date_parse(h->if_unmodified_since, h->if_unmodified_since_length, &date) == 0 &&
               mtime > date) {
        return CONDITIONAL_PRECONDITION_FAILED;
    }
    if (h->if_none_match) {
        if (etag_list_match(h->if_none_match, h->if_none_match_length, etag, etag_length, true))
            return get_or_head ? CONDITIONAL_NOT_MODIFIED : CONDITIONAL_PRECONDITION_FAILED;
    } else if (get_or_head && h->if_modified_since &&
               http_date_parse(h->if_modified_since, h->if_modified_since_length, &date) == 0 &&
               mtime <= date) {
        return CONDITIONAL_NOT_MODIFIED;
    }
    return CONDITIONAL_PROCEED;
}

/* Reads the digits from *i as a number, saturating at UINT64_MAX; returns
 * how many digits there were. */
static size_t number(const char *s, size_t n, size_t *i, uint64_t *value)
{
    size_t start = *i;
    *value = 0;
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9'; (*i)++) {
        unsigned d = (unsigned)(s[*i] - '0');
        *value = *value > (UINT64_MAX - d) / 10 ? UINT64_MAX : *value * 10 + d;
    }
    return *i - start;
}

/* One range-spec from *i: true with its bounds (*suffix: -n, the length in
 * *b; else a-b, or a- with *b UINT64_MAX), false if malformed. */
static bool range_spec(const char *s, size_t n, size_t *i, bool *suffix, uint64_t *a, uint64_t *b)
{
    *suffix = *i < n && s[*i] == '-';
    if (*suffix) {
        (*i)++;
        return number(s, n, i, b) > 0;
    }
    if (number(s, n, i, a) == 0 || *i >= n || s[*i] != '-')
        return false;
    (*i)++;
    if (number(s, n, i, b) == 0)
        *b = UINT64_MAX;
    return *a <= *b;
}

enum range_outcome range_parse(const char *value, size_t length, uint64_t size, uint64_t *first,
                               uint64_t *last)
{
    if (!value || length < 6 || strncasecmp(value, "bytes=", 6) != 0)
        return RANGE_IGNORE;
    size_t i = 6, specs = 0;
    bool suffix = false;
    uint64_t a = 0, b = 0;
    while (i < length) {
        skip_ows(value, length, &i);
        if (i < length && value[i] == ',') {
            i++;
            continue;
        }
        if (i >= length)
            break;
        if (++specs > 1 || !range_spec(value, length, &i, &suffix, &a, &b))
            return RANGE_IGNORE;
        skip_ows(value, length, &i);
        if (i < length && value[i] != ',')
            return RANGE_IGNORE;
    }
    if (specs != 1)
        return RANGE_IGNORE;
    if (suffix) {
        if (b == 0)
            return RANGE_UNSATISFIABLE;
        if (size == 0) /* RFC 9110 14.1.1: satisfiable, yet no byte to send: the whole (empty) file */
            return RANGE_IGNORE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return RANGE_ONE;
    }
    if (a >= size)
        return RANGE_UNSATISFIABLE;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return RANGE_ONE;
}

bool if_range_holds(const char *value, size_t length, const char *etag, size_t etag_length,
                    time_t mtime)
{
    if (!value)
        return true;
    size_t i = 0;
    skip_ows(value, length, &i);
    size_t end = length;
    while (end > i && (value[end - 1] == ' ' || value[end - 1] == '\t'))
        end--;
    if (end > i && (value[i] == '"' || (end - i >= 2 && value[i] == 'W' && value[i + 1] == '/'))) {
        size_t start = i;
        bool weak;
        size_t tag_length = entity_tag(value, end, &i, &weak);
        return tag_length > 0 && i == end &&
               tags_match(value + start, tag_length, etag, etag_length, false);
    }
    time_t date;
    return http_date_parse(value + i, end - i, &date) == 0 && date == mtime;
}
