/* proxy_protocol.h -- the PROXY protocol's header (HAProxy's, versions 1
 * and 2), read from the bytes a load balancer sends before the client's
 * own: who the client is. A pure parser: it sees the bytes that have
 * arrived so far and says whether it needs more, has a whole header, or
 * refuses them. Strict and bounded: a header is at most
 * PROXY_HEADER_MAX bytes, and bytes that cannot begin one are refused at
 * once. */
#ifndef RSP_PROXY_PROTOCOL_H
#define RSP_PROXY_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest v1 header ("PROXY TCP6 " two addresses, two ports, CRLF). */
#define PROXY_V1_MAX 107
/* The most address and TLV bytes a v2 header may carry (ours: HAProxy's
 * allows 65535, but no sender needs more than this for addresses and
 * the usual TLVs). */
#define PROXY_V2_PAYLOAD_MAX 512
/* The most bytes any header takes: v2's 16 fixed bytes and its payload. */
#define PROXY_HEADER_MAX (16 + PROXY_V2_PAYLOAD_MAX)

enum proxy_result {
    PROXY_MORE,                 /* a valid beginning: wait for more bytes */
    PROXY_DONE,                 /* a whole header: see struct proxy_header */
    PROXY_ERROR                 /* not a header: close the connection */
};

struct proxy_header {
    size_t length;              /* PROXY_DONE: the header's bytes (what follows is
                                   the client's stream) */
    bool local;                 /* PROXY_DONE: v2 LOCAL or v1 UNKNOWN: no address
                                   carried; the peer's own is the client */
    struct sockaddr_storage source; /* PROXY_DONE, not local: the client (AF_INET or
                                       AF_INET6, with its port) */
    const char *error;          /* PROXY_ERROR: why, a static string */
};

/* Reads the header at the start of data[0..length). Returns PROXY_MORE
 * (every byte so far may begin a header, and there are fewer than
 * PROXY_HEADER_MAX), PROXY_DONE with out's length, local and source set,
 * or PROXY_ERROR with out->error. Never reads past length. */
enum proxy_result proxy_parse(const unsigned char *data, size_t length, struct proxy_header *out);

#endif
