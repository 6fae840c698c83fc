/* proxy_protocol.c -- the PROXY protocol's header, versions 1 and 2
 * (https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt). */
#include "proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

static const unsigned char v2_signature[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                                0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };

/* Sets out->error to why and returns PROXY_ERROR. */
static enum proxy_result refuse(struct proxy_header *out, const char *why)
{
    out->error = why;
    return PROXY_ERROR;
}

/* True if c may appear in a v1 line before its CR: the words, decimal
 * and hexadecimal digits, dots, colons and single spaces. */
static bool v1_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' ||
           c == ':' || c == ' ';
}

/* Parses a port of a v1 line: "0" or digits without a leading zero, at
 * most 65535. Returns it, or -1. */
static long v1_port(const char *text)
{
    long value = 0;
    size_t n = strlen(text);

    if (n == 0 || n > 5 || (text[0] == '0' && n > 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value <= 65535 ? value : -1;
}

/* Fills out->source from a v1 address and port of the given family.
 * Returns 0, or -1 if either is malformed. */
static int v1_source(int family, const char *address, const char *port_text, struct proxy_header *out)
{
    long port = v1_port(port_text);

    memset(&out->source, 0, sizeof out->source);
    if (port < 0)
        return -1;
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&out->source;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        return inet_pton(AF_INET, address, &in->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->source;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    return inet_pton(AF_INET6, address, &in6->sin6_addr) == 1 ? 0 : -1;
}

/* Parses a whole v1 line (its text up to, not including, CR LF) of
 * `length` bytes, all v1_char(). */
static enum proxy_result v1_line(const unsigned char *data, size_t length, struct proxy_header *out)
{
    char line[PROXY_V1_MAX + 1], *words[7], *save = NULL;
    size_t count = 0;
    int family;

    memcpy(line, data, length);
    line[length] = '\0';
    if (strstr(line, "  ") != NULL || line[length - 1] == ' ')
        return refuse(out, "v1 header with an empty field");
    for (char *w = strtok_r(line, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
        if (count == 6)
            return refuse(out, "v1 header with too many fields");
        words[count++] = w;
    }
    if (count >= 2 && strcmp(words[1], "UNKNOWN") == 0) {
        out->local = true; /* whatever follows UNKNOWN is ignored, as the spec says */
        return PROXY_DONE;
    }
    if (count < 2 || (strcmp(words[1], "TCP4") != 0 && strcmp(words[1], "TCP6") != 0))
        return refuse(out, "v1 header with a protocol other than TCP4, TCP6 or UNKNOWN");
    if (count != 6)
        return refuse(out, "v1 header without two addresses and two ports");
    family = words[1][3] == '4' ? AF_INET : AF_INET6;
    struct proxy_header destination;
    if (v1_source(family, words[2], words[4], out) == -1 ||
        v1_source(family, words[3], words[5], &destination) == -1)
        return refuse(out, "v1 header with a malformed address or port");
    return PROXY_DONE;
}

/* A header that begins "PROXY ": v1. */
static enum proxy_result parse_v1(const unsigned char *data, size_t length, struct proxy_header *out)
{
    size_t n = length < PROXY_V1_MAX ? length : PROXY_V1_MAX;

    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\r') {
            if (i + 1 == length)
                return PROXY_MORE;
            if (data[i + 1] != '\n')
                return refuse(out, "v1 header with a CR not followed by LF");
            if (i + 2 > PROXY_V1_MAX)
                return refuse(out, "v1 header longer than 107 bytes");
            out->length = i + 2;
            return v1_line(data, i, out);
        }
        if (!v1_char(data[i]))
            return refuse(out, "v1 header with a byte that has no place in it");
    }
    if (length >= PROXY_V1_MAX)
        return refuse(out, "v1 header longer than 107 bytes");
    return PROXY_MORE;
}

/* Reads the source address and port of a v2 PROXY header's payload. */
static void v2_source(int family, const unsigned char *p, struct proxy_header *out)
{
    memset(&out->source, 0, sizeof out->source);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&out->source;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, p, 4);
        memcpy(&in->sin_port, p + 8, 2); /* src, dst, then src port: network order both */
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->source;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, p, 16);
        memcpy(&in6->sin6_port, p + 32, 2);
    }
}

/* Checks that the TLVs of payload[0..length) each fit: type, a 16-bit
 * length, and that many bytes. Their content is skipped. */
static bool v2_tlvs_fit(const unsigned char *p, size_t length)
{
    while (length > 0) {
        if (length < 3)
            return false;
        size_t value = ((size_t)p[1] << 8) | p[2];
        if (value > length - 3)
            return false;
        p += 3 + value;
        length -= 3 + value;
    }
    return true;
}

/* A header that begins with v2's signature (all of it checked as far as
 * it has arrived). */
static enum proxy_result parse_v2(const unsigned char *data, size_t length, struct proxy_header *out)
{
    size_t payload, need;
    int family;

    if (length > 12 && (data[12] & 0xF0) != 0x20)
        return refuse(out, "v2 header of a version other than 2");
    if (length > 12 && (data[12] & 0x0F) > 1)
        return refuse(out, "v2 header with a command other than LOCAL or PROXY");
    if (length < 16)
        return PROXY_MORE;
    payload = ((size_t)data[14] << 8) | data[15];
    if (payload > PROXY_V2_PAYLOAD_MAX)
        return refuse(out, "v2 header longer than 512 bytes");
    bool local = (data[12] & 0x0F) == 0;
    if (!local && data[13] != 0x11 && data[13] != 0x21)
        return refuse(out, "v2 PROXY header of a family other than TCP over IPv4 or IPv6");
    family = data[13] == 0x11 ? AF_INET : AF_INET6;
    need = family == AF_INET ? 12 : 36;
    if (!local && payload < need)
        return refuse(out, "v2 header too short for its addresses");
    if (length < 16 + payload)
        return PROXY_MORE;
    out->length = 16 + payload;
    out->local = local;
    if (local)
        return PROXY_DONE; /* a health check of the balancer's own: its payload is ignored */
    if (!v2_tlvs_fit(data + 16 + need, payload - need))
        return refuse(out, "v2 header with a malformed TLV");
    v2_source(family, data + 16, out);
    return PROXY_DONE;
}

enum proxy_result proxy_parse(const unsigned char *data, size_t length, struct proxy_header *out)
{
    static const char v1_start[] = "PROXY ";
    size_t n;

    memset(out, 0, sizeof *out);
    if (length == 0)
        return PROXY_MORE;
    if (data[0] == 'P') {
        n = length < 6 ? length : 6;
        if (memcmp(data, v1_start, n) != 0)
            return refuse(out, "not a PROXY protocol header");
        return length < 6 ? PROXY_MORE : parse_v1(data, length, out);
    }
    n = length < 12 ? length : 12;
    if (memcmp(data, v2_signature, n) != 0)
        return refuse(out, data[0] == v2_signature[0] ? "v2 header with a bad signature"
                                                      : "not a PROXY protocol header");
    return length < 12 ? PROXY_MORE : parse_v2(data, length, out);
}
