/* path.c -- normalizing request paths (RFC 3986, sections 5.2.4 and 6.2.2). */
#include "path.h"

#include "hex.h"

#include <stdbool.h>
#include <string.h>

static bool is_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* Copies one character of in (at *i) to out (at *n), decoding or tidying a
 * percent-escape; advances both. */
static void copy_char(const char *in, size_t length, size_t *i, char *out, size_t *n)
{
    static const char digits[] = "0123456789ABCDEF";
    int high, low;

    if (in[*i] == '%' && *i + 2 < length && (high = hex_value((unsigned char)in[*i + 1])) >= 0 &&
        (low = hex_value((unsigned char)in[*i + 2])) >= 0) {
        unsigned char c = (unsigned char)(high * 16 + low);
        if (is_unreserved(c)) {
            out[(*n)++] = (char)c;
        } else {
            out[(*n)++] = '%';
            out[(*n)++] = digits[high];
            out[(*n)++] = digits[low];
        }
        *i += 3;
        return;
    }
    if (in[*i] == '%') {
        /* A '%' that starts no escape stands for itself: spell it "%25", or
         * decoding what follows could make an escape of it ("%%34%31"
         * would become "%41", which the next reading turns into "A"). */
        out[(*n)++] = '%';
        out[(*n)++] = '2';
        out[(*n)++] = '5';
        (*i)++;
        return;
    }
    out[(*n)++] = in[(*i)++];
}

size_t path_normalize(const char *in, size_t length, char *out)
{
    size_t i = 1, n = 1;

    if (length == 0 || in[0] != '/') {
        memcpy(out, in, length);
        return length;
    }
    out[0] = '/';
    /* Each turn starts with out[0..n) ending in '/': the normal form of the
     * segments so far. */
    while (i < length) {
        size_t start = n;

        while (i < length && in[i] == '/')
            i++;
        if (i == length)
            break;
        while (i < length && in[i] != '/')
            copy_char(in, length, &i, out, &n);
        if (n - start == 1 && out[start] == '.') {
            n = start;
        } else if (n - start == 2 && out[start] == '.' && out[start + 1] == '.') {
            n = start;
            if (n > 1) { /* drop the segment before, keeping its '/' */
                n--;
                while (out[n - 1] != '/')
                    n--;
            }
        } else if (i < length) {
            out[n++] = '/';
        }
    }
    return n;
}
