/* cidr.c -- address prefixes and matching (cidr.h). */
#include "cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* True if the bits of a[0..16) past the first `bits` are all zero. */
static bool tail_zero(const unsigned char *a, unsigned bits)
{
    for (unsigned i = bits; i < 128; i++)
        if (a[i / 8] & (0x80 >> (i % 8)))
            return false;
    return true;
}

/* An IPv4-mapped IPv6 address (family AF_INET6, a[0..16)) becomes the
 * IPv4 address it is, in place; `bits`, if not NULL, its prefix length
 * (a prefix shorter than the mapping's 96 bits stays IPv6). */
static void unmap(int *family, unsigned char a[16], unsigned *bits)
{
    static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    if (*family != AF_INET6 || memcmp(a, mapped, sizeof mapped) != 0 || (bits != NULL && *bits < 96))
        return;
    memmove(a, a + 12, 4);
    memset(a + 4, 0, 12);
    *family = AF_INET;
    if (bits != NULL)
        *bits -= 96;
}

int cidr_address(const char *text, int *family, unsigned char out[16])
{
    memset(out, 0, 16);
    if (inet_pton(AF_INET, text, out) == 1)
        *family = AF_INET;
    else if (inet_pton(AF_INET6, text, out) == 1)
        *family = AF_INET6;
    else
        return -1;
    unmap(family, out, NULL);
    return 0;
}

int cidr_parse(const char *text, struct cidr *out)
{
    char address[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t length = slash != NULL ? (size_t)(slash - text) : strlen(text);
    unsigned max;

    memset(out, 0, sizeof *out);
    if (strcmp(text, "all") == 0) {
        out->family = AF_UNSPEC;
        return 0;
    }
    if (length == 0 || length >= sizeof address)
        return -1;
    memcpy(address, text, length);
    address[length] = '\0';
    if (inet_pton(AF_INET, address, out->address) == 1)
        out->family = AF_INET;
    else if (inet_pton(AF_INET6, address, out->address) == 1)
        out->family = AF_INET6;
    else
        return -1;
    max = out->family == AF_INET ? 32 : 128;
    out->bits = max;
    if (slash != NULL) {
        const char *digits = slash + 1;
        unsigned long bits = 0;
        size_t n = strlen(digits);
        if (n == 0 || n > 3 || (digits[0] == '0' && n > 1))
            return -1;
        for (size_t i = 0; i < n; i++) {
            if (digits[i] < '0' || digits[i] > '9')
                return -1;
            bits = bits * 10 + (unsigned long)(digits[i] - '0');
        }
        if (bits > max)
            return -1;
        out->bits = (unsigned)bits;
    }
    if (!tail_zero(out->address, out->bits))
        return -1;
    unmap(&out->family, out->address, &out->bits);
    return 0;
}

bool cidr_contains(const struct cidr *prefix, int family, const void *raw)
{
    const unsigned char *a = raw;
    unsigned whole = prefix->bits / 8, rest = prefix->bits % 8;

    if (prefix->family == AF_UNSPEC)
        return true; /* "all" */
    if (family != prefix->family)
        return false;
    if (memcmp(a, prefix->address, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xFF << (8 - rest));
    return (a[whole] & mask) == prefix->address[whole];
}

bool cidr_contains_any(const struct cidr *prefixes, size_t count, int family, const void *raw)
{
    for (size_t i = 0; i < count; i++)
        if (cidr_contains(&prefixes[i], family, raw))
            return true;
    return false;
}

bool cidr_match(const struct cidr *prefix, const struct sockaddr_storage *address)
{
    if (address->ss_family == AF_INET)
        return cidr_contains(prefix, AF_INET, &((const struct sockaddr_in *)address)->sin_addr);
    if (address->ss_family != AF_INET6)
        return false;
    unsigned char a[16];
    int family = AF_INET6;

    memcpy(a, &((const struct sockaddr_in6 *)address)->sin6_addr, sizeof a);
    unmap(&family, a, NULL);
    return cidr_contains(prefix, family, a);
}

bool cidr_match_any(const struct cidr *prefixes, size_t count, const struct sockaddr_storage *address)
{
    for (size_t i = 0; i < count; i++)
        if (cidr_match(&prefixes[i], address))
            return true;
    return false;
}
