/* test_fastcgi.c -- tests of the FastCGI record layer (src/fastcgi.c) on
 * its own, built with AddressSanitizer and UndefinedBehaviorSanitizer
 * (`make -C fuzz test-fastcgi`; make regressions runs them too).
 *
 * Streams are encoded and parsed back, whole and in every split into two
 * pieces, and byte by byte; name-value pairs round-trip with 1- and
 * 4-byte lengths; each refusal is met with its reason. A script's CGI
 * heads become HTTP heads (Status, Location, LF or CRLF) or are refused;
 * and the rule of what runs is tried on a real tree in a temp dir (the
 * PATH_INFO hole included). A failed check
 * prints the case and what came; the program exits 1 after all ran. */
#define _GNU_SOURCE /* O_PATH */
#include "fastcgi.h"
#include "fastcgi_script.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char current[128];
static int failures;

/* What parsing a response gave. */
struct parsed {
    struct buffer out, err;
    bool ended, refused;
    const char *error;
    uint32_t app_status;
    int protocol_status;
};

/* Parses data[0..len) cut at `cut` (and fed byte by byte when cut is 0). */
static void parse(const char *data, size_t len, size_t cut, struct parsed *r)
{
    struct fcgi_parser p;
    size_t pieces[2] = { cut, len - cut }, at = 0;

    memset(r, 0, sizeof *r);
    fcgi_parser_init(&p);
    for (size_t i = 0; at < len && !r->refused; i++) {
        size_t n = cut == 0 ? 1 : pieces[i];
        size_t off = 0;
        while (off < n && !r->refused) {
            struct fcgi_event ev;
            size_t used;
            enum fcgi_result rc = fcgi_parse(&p, data + at + off, n - off, &used, &ev);
            if (rc == FCGI_ERROR) {
                r->refused = true;
                r->error = p.error;
            } else if (rc == FCGI_EVENT && ev.kind == FCGI_EVENT_END) {
                r->ended = true;
                r->app_status = ev.app_status;
                r->protocol_status = ev.protocol_status;
            } else if (rc == FCGI_EVENT) {
                buffer_append(ev.kind == FCGI_EVENT_STDOUT ? &r->out : &r->err, ev.data, ev.length);
            }
            off += used;
        }
        at += n;
    }
}

static void parsed_free(struct parsed *r)
{
    buffer_free(&r->out);
    buffer_free(&r->err);
}

/* Appends an END_REQUEST record. */
static void append_end(struct buffer *b, uint32_t app, int protocol)
{
    unsigned char body[8] = { app >> 24, app >> 16, app >> 8, app, (unsigned char)protocol, 0, 0, 0 };
    fcgi_append_header(b, FCGI_END_REQUEST, 8, 0);
    buffer_append(b, (const char *)body, 8);
}

/* A response of `size` STDOUT bytes, a STDERR line, END_REQUEST: read back
 * whole, in every two-piece split (small ones), and byte by byte. */
static void round_trip(size_t size)
{
    char *text = malloc(size ? size : 1);
    struct buffer b = BUFFER_INIT;

    for (size_t i = 0; i < size; i++)
        text[i] = (char)('a' + i % 26);
    fcgi_append_stream(&b, FCGI_STDOUT, text, size);
    fcgi_append_stream(&b, FCGI_STDERR, "warning", 7);
    fcgi_append_stream(&b, FCGI_STDOUT, NULL, 0);
    fcgi_append_stream(&b, FCGI_STDERR, NULL, 0);
    append_end(&b, 258, FCGI_REQUEST_COMPLETE);
    size_t len = buffer_length(&b);
    for (size_t cut = 0; cut <= len; cut += (size <= 64 || cut == 0 ? 1 : len / 7 + 1)) {
        struct parsed r;
        snprintf(current, sizeof current, "round trip of %zu bytes cut at %zu", size, cut);
        parse(buffer_bytes(&b), len, cut, &r);
        CHECK(!r.refused, "refused: %s", r.error);
        CHECK(r.ended && r.app_status == 258 && r.protocol_status == 0, "end %d app %u", r.ended, r.app_status);
        CHECK(buffer_length(&r.out) == size && (size == 0 || memcmp(buffer_bytes(&r.out), text, size) == 0),
              "stdout of %zu bytes", buffer_length(&r.out));
        CHECK(buffer_length(&r.err) == 7 && memcmp(buffer_bytes(&r.err), "warning", 7) == 0, "stderr");
        parsed_free(&r);
    }
    buffer_free(&b);
    free(text);
}

/* The records a stream is cut into: at most 65535 bytes each, padded to 8. */
static void stream_layout(void)
{
    struct buffer b = BUFFER_INIT;
    size_t size = 65535 + 65535 + 10;
    char *data = calloc(1, size);

    snprintf(current, sizeof current, "stream layout");
    fcgi_append_stream(&b, FCGI_STDIN, data, size);
    const unsigned char *h = (const unsigned char *)buffer_bytes(&b);
    size_t at = 0, records = 0, total = 0;
    while (at < buffer_length(&b)) {
        size_t n = (size_t)h[at + 4] << 8 | h[at + 5], pad = h[at + 6];
        CHECK(h[at] == 1 && h[at + 1] == FCGI_STDIN && h[at + 2] == 0 && h[at + 3] == 1, "header %zu", records);
        CHECK((n + pad) % 8 == 0 && pad < 8, "record %zu: %zu + %zu", records, n, pad);
        total += n;
        records++;
        at += 8 + n + pad;
    }
    CHECK(records == 3 && total == size && at == buffer_length(&b), "%zu records of %zu bytes", records, total);
    buffer_free(&b);
    fcgi_append_stream(&b, FCGI_PARAMS, NULL, 0);
    CHECK(buffer_length(&b) == 8 && buffer_bytes(&b)[1] == FCGI_PARAMS && buffer_bytes(&b)[5] == 0, "empty record");
    buffer_free(&b);
    fcgi_append_begin(&b, true);
    const char *s = buffer_bytes(&b);
    CHECK(buffer_length(&b) == 16 && s[1] == FCGI_BEGIN_REQUEST && s[5] == 8 && s[9] == FCGI_RESPONDER &&
              s[10] == FCGI_KEEP_CONN, "BEGIN_REQUEST");
    buffer_free(&b);
    free(data);
}

/* A name-value pair of these lengths encodes and decodes back. */
static void pair(size_t name_length, size_t value_length)
{
    char *name = malloc(name_length + 1), *value = malloc(value_length + 1);
    struct buffer b = BUFFER_INIT;
    const char *n, *v;
    size_t nl, vl, used;

    snprintf(current, sizeof current, "pair %zu/%zu", name_length, value_length);
    memset(name, 'N', name_length);
    memset(value, 'v', value_length);
    CHECK(fcgi_append_pair(&b, name, name_length, value, value_length) == 0, "append");
    size_t expect = (name_length < 128 ? 1 : 4) + (value_length < 128 ? 1 : 4) + name_length + value_length;
    CHECK(buffer_length(&b) == expect, "%zu bytes, not %zu", buffer_length(&b), expect);
    CHECK(fcgi_pair_decode(buffer_bytes(&b), buffer_length(&b), &used, &n, &nl, &v, &vl) == 0 &&
              used == expect && nl == name_length && vl == value_length &&
              memcmp(n, name, nl) == 0 && memcmp(v, value, vl) == 0, "decoded back");
    for (size_t k = 0; k < buffer_length(&b); k += (k < 16 ? 1 : 997))
        CHECK(fcgi_pair_decode(buffer_bytes(&b), k, &used, &n, &nl, &v, &vl) == -1, "a prefix of %zu decoded", k);
    buffer_free(&b);
    free(name);
    free(value);
}

/* A response that is refused, whole and byte by byte, with its reason. */
static void refused(const char *name, const unsigned char *bytes, size_t len, const char *reason)
{
    for (size_t cut = 0; cut <= len; cut += len) {
        struct parsed r;
        snprintf(current, sizeof current, "refuses %s (cut %zu)", name, cut);
        parse((const char *)bytes, len, cut, &r);
        CHECK(r.refused && r.error != NULL && strstr(r.error, reason) != NULL, "got %s", r.error ? r.error : "no refusal");
        parsed_free(&r);
        if (len == 0)
            break;
    }
}

static void refusals(void)
{
    static const unsigned char version2[] = { 2, 6, 0, 1, 0, 0, 0, 0 };
    static const unsigned char id2[] = { 1, 6, 0, 2, 0, 1, 7, 0, 'x', 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char id0[] = { 1, 10, 0, 0, 0, 0, 0, 0 };
    static const unsigned char params[] = { 1, 4, 0, 1, 0, 0, 0, 0 };
    static const unsigned char stdin_[] = { 1, 5, 0, 1, 0, 0, 0, 0 };
    static const unsigned char unknown[] = { 1, 11, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char type99[] = { 1, 99, 0, 1, 0, 0, 0, 0 };
    static const unsigned char short_end[] = { 1, 3, 0, 1, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char long_end[] = { 1, 3, 0, 1, 0, 9, 7, 0 };
    static const unsigned char after_end[] = { 1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 6, 0, 1, 0, 0, 0, 0 };

    refused("version 2", version2, sizeof version2, "version");
    refused("request id 2", id2, sizeof id2, "request id");
    refused("a management record (id 0)", id0, sizeof id0, "request id");
    refused("PARAMS from a responder", params, sizeof params, "type");
    refused("STDIN from a responder", stdin_, sizeof stdin_, "type");
    refused("UNKNOWN_TYPE", unknown, sizeof unknown, "type");
    refused("type 99", type99, sizeof type99, "type");
    refused("END_REQUEST of 7 bytes", short_end, sizeof short_end, "8 bytes");
    refused("END_REQUEST of 9 bytes", long_end, sizeof long_end, "8 bytes");
    refused("bytes after END_REQUEST", after_end, sizeof after_end, "after END_REQUEST");
}

/* END_REQUEST's statuses are read as sent; an incomplete response is no end. */
static void end_statuses(void)
{
    struct buffer b = BUFFER_INIT;
    struct parsed r;

    snprintf(current, sizeof current, "END_REQUEST overloaded, padded");
    unsigned char body[8] = { 0, 0, 0, 0, FCGI_OVERLOADED, 0, 0, 0 };
    fcgi_append_header(&b, FCGI_END_REQUEST, 8, 5);
    buffer_append(&b, (const char *)body, 8);
    buffer_append(&b, "\0\0\0\0\0", 5);
    parse(buffer_bytes(&b), buffer_length(&b), 0, &r);
    CHECK(!r.refused && r.ended && r.protocol_status == FCGI_OVERLOADED, "protocol status %d", r.protocol_status);
    parsed_free(&r);
    parse(buffer_bytes(&b), buffer_length(&b) - 1, 0, &r);
    CHECK(!r.refused && !r.ended, "ended before its padding");
    parsed_free(&r);
    buffer_free(&b);
}

/* A CGI head read: its length (or 0, -1) and the HTTP head it gave. */
static void cgi(const char *name, const char *output, ssize_t expect_used, const char *expect_head)
{
    struct buffer out = BUFFER_INIT;
    size_t len = strlen(output);

    snprintf(current, sizeof current, "CGI head %s", name);
    ssize_t used = fcgi_cgi_head(output, len, &out);
    CHECK(used == expect_used, "used %zd, not %zd", used, expect_used);
    if (expect_head != NULL)
        CHECK(buffer_length(&out) == strlen(expect_head) &&
                  memcmp(buffer_bytes(&out), expect_head, buffer_length(&out)) == 0,
              "gave \"%.*s\"", (int)buffer_length(&out), buffer_bytes(&out));
    /* Every shorter prefix of a whole head needs more. */
    for (size_t k = 0; expect_used > 0 && k < (size_t)expect_used; k++) {
        struct buffer part = BUFFER_INIT;
        CHECK(fcgi_cgi_head(output, k, &part) == 0, "a prefix of %zu was not incomplete", k);
        buffer_free(&part);
    }
    buffer_free(&out);
}

static void cgi_heads(void)
{
    cgi("plain", "Content-type: text/html\r\n\r\nbody", 27, "HTTP/1.1 200 OK\r\nContent-type: text/html\r\n\r\n");
    cgi("LF only", "Content-Type: text/plain\nX-A: 1\n\nhi", 33,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\n");
    cgi("Status", "Status: 404 Not Found\r\nX-B: 2\r\n\r\n", 33, "HTTP/1.1 404 Not Found\r\nX-B: 2\r\n\r\n");
    cgi("Status without reason", "Status: 503\n\n", 13, "HTTP/1.1 503\r\n\r\n");
    cgi("Location", "Location: https://example.org/x\r\n\r\n", 35,
        "HTTP/1.1 302 Found\r\nLocation: https://example.org/x\r\n\r\n");
    cgi("local Location", "Location: /login\n\n", 18, "HTTP/1.1 302 Found\r\nLocation: /login\r\n\r\n");
    cgi("Location and Status", "Location: /a\nStatus: 301 Moved Permanently\n\n", 44,
        "HTTP/1.1 301 Moved Permanently\r\nLocation: /a\r\n\r\n");
    cgi("two Set-Cookie", "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n", 36,
        "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n");
    cgi("no head at all", "\r\nbody", 2, "HTTP/1.1 200 OK\r\n\r\n");
    cgi("incomplete", "Content-type: text/html\r\n", 0, "");
    cgi("no colon", "hello world\n\n", -1, NULL);
    cgi("bad name", "Bad Name: x\n\n", -1, NULL);
    cgi("Status 99", "Status: 99 Odd\n\n", -1, NULL);
    cgi("Status 100", "Status: 100 Continue\n\n", -1, NULL);
    cgi("Status 600", "Status: 600\n\n", -1, NULL);
    cgi("Status letters", "Status: abc\n\n", -1, NULL);
    cgi("two Status", "Status: 200 OK\nStatus: 404 No\n\n", -1, NULL);
    char *big = malloc(FCGI_CGI_HEAD_MAX + 16);
    memset(big, 'a', FCGI_CGI_HEAD_MAX + 15);
    memcpy(big, "X-Big: ", 7);
    big[FCGI_CGI_HEAD_MAX + 15] = '\0';
    cgi("a line beyond the limit", big, -1, NULL);
    free(big);
}

/* Creates dir/name holding text (a directory when text is NULL). */
static void make(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (text == NULL) {
        mkdir(path, 0755);
        return;
    }
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* The time fastcgi_script_find is told (seconds). */
static double now = 1000.0;

/* What target runs beneath root: the outcome, and the script's names. */
static void what(int root_fd, const char *root, struct fastcgi_settings *s, const char *target,
                 enum fastcgi_what expect, const char *name)
{
    struct fastcgi_script script;
    char filename[600];

    snprintf(current, sizeof current, "what %s runs", target);
    memset(&script, 0, sizeof script);
    enum fastcgi_what got = fastcgi_script_find(root_fd, root, target, strlen(target), s, now, &script);
    CHECK(got == expect, "got %d, not %d", got, expect);
    if (name != NULL && got == expect) {
        snprintf(filename, sizeof filename, "%s%s", root, name);
        CHECK(strcmp(script.name, name) == 0, "SCRIPT_NAME %s", script.name);
        CHECK(strcmp(script.filename, filename) == 0, "SCRIPT_FILENAME %s", script.filename);
    }
}

static void script_rule(void)
{
    char root[] = "/tmp/test_fastcgi.XXXXXX";
    char *extensions[] = { ".php", ".phtml" };
    struct fastcgi_settings s = { .index = "index.php", .extensions = extensions, .extension_count = 2 };

    snprintf(current, sizeof current, "script rule tree");
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    make(root, "index.php", "<?php echo 1;");
    make(root, "info.php", "<?php phpinfo();");
    make(root, "a.phtml", "<?php");
    make(root, "style.css", "body{}");
    make(root, "uploads", NULL);
    make(root, "uploads/cat.jpg", "<?php echo 'pwned';");
    make(root, "blog", NULL);
    make(root, "blog/index.php", "<?php");
    make(root, "static", NULL);
    make(root, "static/index.html", "<p>");
    make(root, "empty", NULL);
    make(root, ".env", "SECRET=1");
    int fd = open(root, O_PATH | O_DIRECTORY);
    CHECK(fd >= 0, "open root");

    what(fd, root, &s, "/info.php", FASTCGI_RUN, "/info.php");
    what(fd, root, &s, "/info.php?x=1", FASTCGI_RUN, "/info.php");
    what(fd, root, &s, "/a.phtml", FASTCGI_RUN, "/a.phtml");
    what(fd, root, &s, "/INFO.PHP", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/style.css", FASTCGI_FILE, NULL);
    what(fd, root, &s, "/uploads/cat.jpg", FASTCGI_FILE, NULL);
    what(fd, root, &s, "/uploads/cat.jpg/x.php", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/uploads/cat.jpg%2fx.php", FASTCGI_NOT_FOUND, NULL);
    what(fd, root, &s, "/info.php/extra", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/missing.php", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/some/page", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/", FASTCGI_RUN, "/index.php");
    what(fd, root, &s, "/blog", FASTCGI_REDIRECT, NULL);
    what(fd, root, &s, "/blog/", FASTCGI_RUN, "/blog/index.php");
    what(fd, root, &s, "/static/", FASTCGI_FILE, NULL);
    what(fd, root, &s, "/empty/", FASTCGI_FRONT, "/index.php");
    what(fd, root, &s, "/.env", FASTCGI_NOT_FOUND, NULL);
    what(fd, root, &s, "/../etc/passwd", FASTCGI_NOT_FOUND, NULL);
    what(fd, root, &s, "/uploads/../info.php", FASTCGI_NOT_FOUND, NULL);
    /* A script found is trusted for FASTCGI_SEEN_FOR seconds: removed,
     * it is still named that long (php-fpm answers 404 for it then). */
    char path[600];
    snprintf(path, sizeof path, "%s/index.php", root);
    unlink(path);
    what(fd, root, &s, "/", FASTCGI_RUN, "/index.php");
    what(fd, root, &s, "/some/page", FASTCGI_FRONT, "/index.php");
    now += FASTCGI_SEEN_FOR;
    what(fd, root, &s, "/some/page", FASTCGI_NOT_FOUND, NULL);
    what(fd, root, &s, "/", FASTCGI_NOT_FOUND, NULL);
    /* ... and not in another root's (another descriptor, same path). */
    snprintf(path, sizeof path, "%s/info.php", root);
    int other = open(root, O_PATH | O_DIRECTORY);
    CHECK(other >= 0, "open root again");
    what(fd, root, &s, "/info.php", FASTCGI_RUN, "/info.php");
    unlink(path);
    what(fd, root, &s, "/info.php", FASTCGI_RUN, "/info.php");
    what(other, root, &s, "/info.php", FASTCGI_NOT_FOUND, NULL);
    close(other);
    /* A new script runs at once: what was not found is not kept. */
    what(fd, root, &s, "/new.php", FASTCGI_NOT_FOUND, NULL);
    make(root, "new.php", "<?php");
    what(fd, root, &s, "/new.php", FASTCGI_RUN, "/new.php");
    /* Only scripts are kept: a file replaced by a directory is seen at once. */
    snprintf(path, sizeof path, "%s/style.css", root);
    unlink(path);
    make(root, "style.css", NULL);
    what(fd, root, &s, "/style.css", FASTCGI_REDIRECT, NULL);
    /* The clock going back does not make an old finding new. */
    snprintf(path, sizeof path, "%s/a.phtml", root);
    unlink(path);
    now -= 10 * FASTCGI_SEEN_FOR;
    what(fd, root, &s, "/a.phtml", FASTCGI_NOT_FOUND, NULL);
    free(s.seen);
    close(fd);
    char command[600];
    snprintf(command, sizeof command, "rm -rf %s", root);
    CHECK(system(command) == 0, "rm -rf");
}

int main(void)
{
    size_t sizes[] = { 0, 1, 7, 8, 9, 64, 65534, 65535, 65536, 200000 };

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        round_trip(sizes[i]);
    stream_layout();
    pair(0, 0);
    pair(127, 128);
    pair(128, 127);
    pair(5, 70000);
    pair(300, 0);
    refusals();
    end_statuses();
    cgi_heads();
    script_rule();
    if (failures > 0) {
        fprintf(stderr, "test_fastcgi: %d checks failed\n", failures);
        return 1;
    }
    printf("test_fastcgi: all checks passed\n");
    return 0;
}
