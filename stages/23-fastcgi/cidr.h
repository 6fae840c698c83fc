/* cidr.h -- address prefixes ("10.0.0.0/8", "2001:db8::/32", one
 * address, or "all") and whether an address falls within one:
 * trusted_proxies, allow and deny. An IPv4 address that reaches an IPv6
 * socket as ::ffff:a.b.c.d (and such a prefix) is taken as the IPv4 address
 * it is, here only. */
#ifndef RSP_CIDR_H
#define RSP_CIDR_H

#include <stdbool.h>
#include <sys/socket.h>

struct cidr {
    int family;                 /* AF_INET or AF_INET6; AF_UNSPEC: "all" (bits 0) */
    unsigned char address[16];  /* network order; IPv4 in the first 4 bytes; bits past
                                   the prefix are zero */
    unsigned bits;              /* the prefix length: 0..32 or 0..128 */
};

/* Parses "ADDRESS/BITS", "ADDRESS" (all its bits) or "all" (every
 * address of both families) into out. The address's bits past the prefix
 * must be zero ("10.1.0.0/8" is refused: it says something other than it
 * means). Returns 0, or -1. */
int cidr_parse(const char *text, struct cidr *out);

/* Reads a textual address (as relay's client_address) into *family and
 * out's 4 or 16 bytes. Returns 0, or -1 if text is no address. */
int cidr_address(const char *text, int *family, unsigned char out[16]);

/* True if the address (family AF_INET or AF_INET6, `raw` its 4 or 16
 * bytes in network order) is within prefix. */
bool cidr_contains(const struct cidr *prefix, int family, const void *raw);

/* True if the address (as cidr_contains takes it) is within one of the
 * count prefixes. */
bool cidr_contains_any(const struct cidr *prefixes, size_t count, int family, const void *raw);

/* True if the socket address is within prefix (a v4-mapped IPv6 address
 * as its IPv4 one; other families never). */
bool cidr_match(const struct cidr *prefix, const struct sockaddr_storage *address);

/* True if the address is within one of the count prefixes. */
bool cidr_match_any(const struct cidr *prefixes, size_t count, const struct sockaddr_storage *address);

#endif
