/* test_proxy_protocol.c -- tests of the PROXY protocol's header parser
 * (src/proxy_protocol.c) and of address prefixes (src/cidr.c) on their
 * own, built with AddressSanitizer and UndefinedBehaviorSanitizer
 * (`make -C fuzz test-proxy-protocol`; make regressions runs them too).
 *
 * Each header is parsed whole and byte by byte as it would arrive: every
 * shorter prefix must need more, and the whole (with the client's first
 * bytes after it) must give the header's length and address. Refused
 * inputs must be refused with their reason as soon as the bytes show it.
 * A failed check prints the case and what came; the program exits 1
 * after all ran. */
#include "cidr.h"
#include "proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static char current[128];
static int failures;

/* The source of a parsed header as "ADDRESS PORT" text. */
static void source_text(const struct proxy_header *h, char *out, size_t size)
{
    char a[INET6_ADDRSTRLEN] = "?";

    if (h->source.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&h->source;
        inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
        snprintf(out, size, "%s %u", a, ntohs(in->sin_port));
    } else if (h->source.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&h->source;
        inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
        snprintf(out, size, "%s %u", a, ntohs(in6->sin6_port));
    } else {
        snprintf(out, size, "family %d", h->source.ss_family);
    }
}

/* The header of n bytes must parse byte by byte, then whole with a
 * request after it, to `expected` ("ADDRESS PORT", or NULL: local). */
static void accepts(const char *name, const void *header, size_t n, const char *expected)
{
    unsigned char data[PROXY_HEADER_MAX + 64];
    struct proxy_header h;
    char got[96];

    snprintf(current, sizeof current, "accepts %s", name);
    memcpy(data, header, n);
    memcpy(data + n, "GET / HTTP/1.1\r\n", 16);
    for (size_t k = 0; k < n; k++)
        CHECK(proxy_parse(data, k, &h) == PROXY_MORE, "%zu of %zu bytes: not PROXY_MORE (%s)", k, n,
              h.error ? h.error : "done");
    CHECK(proxy_parse(data, n + 16, &h) == PROXY_DONE, "refused: %s", h.error ? h.error : "more");
    CHECK(h.length == n, "length %zu, not %zu", h.length, n);
    if (expected == NULL) {
        CHECK(h.local, "not local");
    } else {
        source_text(&h, got, sizeof got);
        CHECK(!h.local && strcmp(got, expected) == 0, "source %s, not %s", got, expected);
    }
}

/* The n bytes must be refused (whole) for a reason containing `why`. */
static void refuses(const char *name, const void *bytes, size_t n, const char *why)
{
    struct proxy_header h;
    enum proxy_result r = proxy_parse(bytes, n, &h);

    snprintf(current, sizeof current, "refuses %s", name);
    CHECK(r == PROXY_ERROR, "result %d", r);
    CHECK(r != PROXY_ERROR || strstr(h.error, why) != NULL, "reason \"%s\", not \"%s\"", h.error, why);
}

#define SIG "\r\n\r\n\0\r\nQUIT\n"

static void test_v1(void)
{
    static const char longest[] = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                                  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    char too_long[200];

    accepts("v1 TCP4", "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n", 45, "192.0.2.1 56324");
    accepts("v1 TCP6", "PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\n", 45, "2001:db8::1 4000");
    accepts("v1 UNKNOWN", "PROXY UNKNOWN\r\n", 15, NULL);
    accepts("v1 UNKNOWN with addresses", "PROXY UNKNOWN ::1 ::1 1 2\r\n", 27, NULL);
    accepts("v1 longest (107 bytes)", longest, sizeof longest - 1, NULL);
    snprintf(current, sizeof current, "v1 longest is 107 bytes");
    CHECK(sizeof longest - 1 == PROXY_V1_MAX, "%zu", sizeof longest - 1);

    memset(too_long, '1', sizeof too_long);
    memcpy(too_long, "PROXY TCP4 ", 11);
    refuses("v1 over 107 bytes", too_long, sizeof too_long, "longer than 107");
    refuses("v1 TCP5", "PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n", 32, "protocol other than");
    refuses("v1 TCP4 with an IPv6 address", "PROXY TCP4 ::1 ::1 1 2\r\n", 24, "malformed address");
    refuses("v1 port over 65535", "PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n", 36, "malformed address");
    refuses("v1 port with a leading zero", "PROXY TCP4 1.2.3.4 1.2.3.4 01 2\r\n", 33, "malformed address");
    refuses("v1 missing a port", "PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n", 30, "two addresses");
    refuses("v1 two spaces", "PROXY TCP4  1.2.3.4 1.2.3.4 1 2\r\n", 33, "empty field");
    refuses("v1 LF alone", "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n", 31, "no place");
    refuses("v1 CR alone", "PROXY TCP4 1.2.3.4 1.2.3.4 1 2\rX", 32, "CR not followed");
    refuses("v1 lower case", "proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n", 32, "not a PROXY");
    refuses("v1 garbage at once", "GET", 3, "not a PROXY");
    refuses("v1 PROXX", "PROXX", 5, "not a PROXY");
    refuses("v1 a NUL byte", "PROXY TCP4 1\0", 13, "no place");
}

static void test_v2(void)
{
    static const unsigned char tcp4[] = SIG "\x21\x11\x00\x0c"
                                            "\xc0\x00\x02\x01\xc6\x33\x64\x02\xdc\x04\x01\xbb";
    static const unsigned char tcp6[] = SIG "\x21\x21\x00\x24"
                                            "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01"
                                            "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x02"
                                            "\x00\x50\x01\xbb";
    static const unsigned char tlv[] = SIG "\x21\x11\x00\x13"
                                           "\xc0\x00\x02\x01\xc6\x33\x64\x02\xdc\x04\x01\xbb"
                                           "\x04\x00\x04" "abcd";
    static const unsigned char local[] = SIG "\x20\x00\x00\x00";
    static const unsigned char local_tcp4[] = SIG "\x20\x11\x00\x0c"
                                                  "\x7f\0\0\x01\x7f\0\0\x01\0\x01\0\x02";
    unsigned char big[16 + 513];

    accepts("v2 PROXY TCP4", tcp4, sizeof tcp4 - 1, "192.0.2.1 56324");
    accepts("v2 PROXY TCP6", tcp6, sizeof tcp6 - 1, "2001:db8::1 80");
    accepts("v2 PROXY with a TLV", tlv, sizeof tlv - 1, "192.0.2.1 56324");
    accepts("v2 LOCAL", local, sizeof local - 1, NULL);
    accepts("v2 LOCAL with addresses", local_tcp4, sizeof local_tcp4 - 1, NULL);

    memcpy(big, tcp4, 16);
    memset(big + 16, 0, sizeof big - 16);
    big[14] = 0x02; /* 513 */
    big[15] = 0x01;
    refuses("v2 over 512 bytes", big, 16, "longer than 512");
    big[14] = 0x02;
    big[15] = 0x00; /* 512: accepted */
    big[16 + 12] = 0x04;
    big[16 + 13] = 0x01;
    big[16 + 14] = 0xF1; /* one TLV of 497 bytes: 12 + 3 + 497 = 512 */
    accepts("v2 of 512 bytes", big, 16 + 512, "0.0.0.0 0");
    refuses("v2 bad signature", "\r\n\r\n\1", 5, "bad signature");
    refuses("v2 bad signature late", "\r\n\r\n\0\r\nQUIX\n", 12, "bad signature");
    refuses("v2 version 1", SIG "\x11\x11\x00\x0c", 13, "version other than 2");
    refuses("v2 command 2", SIG "\x22\x11\x00\x0c", 13, "command other than");
    refuses("v2 UDP", SIG "\x21\x12\x00\x0c", 16, "family other than");
    refuses("v2 UNIX", SIG "\x21\x31\x00\xd8", 16, "family other than");
    refuses("v2 PROXY without addresses", SIG "\x21\x11\x00\x04", 16, "too short");
    refuses("v2 malformed TLV", SIG "\x21\x11\x00\x10\x7f\0\0\x01\x7f\0\0\x01\0\x01\0\x02\x04\x00\x09\0", 32,
            "malformed TLV");
}

/* text must parse (or not, with ok false) and contain address `in` and
 * not `out` (either NULL to skip). */
static void prefix(const char *text, bool ok, const char *in, const char *out)
{
    struct cidr c;
    struct sockaddr_storage a;

    snprintf(current, sizeof current, "cidr %s", text);
    CHECK((cidr_parse(text, &c) == 0) == ok, "parse: not %s", ok ? "accepted" : "refused");
    for (int i = 0; ok && i < 2; i++) {
        const char *address = i == 0 ? in : out;
        if (address == NULL)
            continue;
        memset(&a, 0, sizeof a);
        if (strchr(address, ':') == NULL) {
            a.ss_family = AF_INET;
            inet_pton(AF_INET, address, &((struct sockaddr_in *)&a)->sin_addr);
        } else {
            a.ss_family = AF_INET6;
            inet_pton(AF_INET6, address, &((struct sockaddr_in6 *)&a)->sin6_addr);
        }
        CHECK(cidr_match(&c, &a) == (i == 0), "%s %s", address, i == 0 ? "not matched" : "matched");
    }
}

static void test_cidr(void)
{
    prefix("10.0.0.0/8", true, "10.255.1.2", "11.0.0.1");
    prefix("10.0.0.0/8", true, "::ffff:10.1.2.3", "::ffff:11.1.2.3");
    prefix("127.0.0.1", true, "127.0.0.1", "127.0.0.2");
    prefix("192.168.1.128/25", true, "192.168.1.200", "192.168.1.127");
    prefix("0.0.0.0/0", true, "1.2.3.4", "::1");
    prefix("::1/128", true, "::1", "::2");
    prefix("2001:db8::/32", true, "2001:db8:ffff::1", "2001:db9::1");
    prefix("::/0", true, "2001:db8::1", "127.0.0.1");
    prefix("all", true, "192.0.2.1", NULL);
    prefix("all", true, "2001:db8::1", NULL);
    /* An IPv4-mapped prefix is the IPv4 prefix it maps. */
    prefix("::ffff:10.0.0.0/104", true, "10.1.2.3", "11.1.2.3");
    prefix("::ffff:10.0.0.0/104", true, "::ffff:10.1.2.3", "2001:db8::1");
    prefix("10.1.0.0/8", false, NULL, NULL);
    prefix("10.0.0.0/33", false, NULL, NULL);
    prefix("10.0.0.0/", false, NULL, NULL);
    prefix("10.0.0.0/08", false, NULL, NULL);
    prefix("10.0.0.0/8x", false, NULL, NULL);
    prefix("/8", false, NULL, NULL);
    prefix("example.com", false, NULL, NULL);
    prefix("::1/129", false, NULL, NULL);
}

int main(void)
{
    test_v1();
    test_v2();
    test_cidr();
    if (failures > 0) {
        fprintf(stderr, "test_proxy_protocol: %d checks failed\n", failures);
        return 1;
    }
    printf("test_proxy_protocol: all checks passed\n");
    return 0;
}
