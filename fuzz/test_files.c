/* test_files.c -- tests of the file-serving modules (src/file_path.c,
 * mime.c, http_date.c, conditional.c, accept_encoding.c) on their own,
 * built with AddressSanitizer and UndefinedBehaviorSanitizer (`make -C
 * fuzz test-files`).
 *
 * The parsers get the cases RFC 9110 and the spec name, good and bad.
 * file_open gets a real tree in a temp dir: a root holding files, a
 * directory with index.html and one without, dot files, a FIFO, a symlink
 * that stays beneath the root and one to a secret outside it. The tree is
 * tried twice, each time in a child process: once with openat2 and once
 * with RSP_NO_OPENAT2=1 (the O_NOFOLLOW walk, which refuses every
 * symlink). A failed assertion prints the test, the condition and what
 * came; the program exits 1 after all tests ran. */
#define _GNU_SOURCE /* O_PATH */
#include "accept_encoding.h"
#include "conditional.h"
#include "file_path.h"
#include "http_date.h"
#include "mime.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *current;
static int failures;

#define S(lit) lit, sizeof(lit) - 1

/* 784111777 is Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example. */
#define EXAMPLE 784111777

static void test_http_date(void)
{
    current = "http_date";
    char buf[HTTP_DATE_SIZE];
    CHECK(http_date_format(EXAMPLE, buf) == 0 && strcmp(buf, "Sun, 06 Nov 1994 08:49:37 GMT") == 0,
          "got %s", buf);
    CHECK(http_date_format(0, buf) == 0 && strcmp(buf, "Thu, 01 Jan 1970 00:00:00 GMT") == 0, "%s", buf);
    time_t t = 0;
    CHECK(http_date_parse(S("Sun, 06 Nov 1994 08:49:37 GMT"), &t) == 0 && t == EXAMPLE, "%lld", (long long)t);
    CHECK(http_date_parse(S("Sunday, 06-Nov-94 08:49:37 GMT"), &t) == 0 && t == EXAMPLE, "%lld", (long long)t);
    CHECK(http_date_parse(S("Sun Nov  6 08:49:37 1994"), &t) == 0 && t == EXAMPLE, "%lld", (long long)t);
    CHECK(http_date_parse(S("Thu Feb 29 00:00:00 2024"), &t) == 0, "a leap day");
    static const char *const bad[] = {
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT", "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", " Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 31 Apr 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 1994 ",
        "Funday, 06-Nov-94 08:49:37 GMT", "1994-11-06T08:49:37Z", "", "784111777",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(http_date_parse(bad[i], strlen(bad[i]), &t) == -1, "accepted \"%s\"", bad[i]);
    for (time_t x = -86400 * 400; x < (time_t)4102444800; x += 86400 * 37 + 3607) {
        CHECK(http_date_format(x, buf) == 0 && http_date_parse(buf, 29, &t) == 0 && t == x, "%s", buf);
    }
}

static void test_accept_encoding(void)
{
    current = "accept_encoding";
    struct { const char *value; unsigned allowed; enum encoding want; } cases[] = {
        { "gzip, deflate, br", ENCODING_ALL, ENCODING_BR },
        { "gzip, deflate, br, zstd", ENCODING_ALL, ENCODING_BR },
        { "gzip, zstd", ENCODING_ALL, ENCODING_ZSTD },
        { "gzip", ENCODING_ALL, ENCODING_GZIP },
        { "x-gzip", ENCODING_ALL, ENCODING_GZIP },
        { "GZIP", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=0.5, gzip;q=0.8", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=0.5 , gzip ; q=0.5", ENCODING_ALL, ENCODING_BR },
        { "br;q=0, gzip", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=0", ENCODING_ALL, ENCODING_NONE },
        { "*", ENCODING_ALL, ENCODING_BR },
        { "*;q=0.1, gzip;q=0.5", ENCODING_ALL, ENCODING_GZIP },
        { "*;q=0", ENCODING_ALL, ENCODING_NONE },
        { "identity", ENCODING_ALL, ENCODING_NONE },
        { "", ENCODING_ALL, ENCODING_NONE },
        { "deflate", ENCODING_ALL, ENCODING_NONE },
        { "br", ENCODING_BIT(ENCODING_GZIP), ENCODING_NONE },
        { "br, gzip", ENCODING_BIT(ENCODING_GZIP), ENCODING_GZIP },
        { "br;q=1.5, gzip", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=0.1234, gzip;q=0.1", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=abc, gzip;q=0.1", ENCODING_ALL, ENCODING_GZIP },
        { "br;q=1.000", ENCODING_ALL, ENCODING_BR },
        { "br;q=1.001, gzip", ENCODING_ALL, ENCODING_GZIP },
        { "br;foo=\"a,b;q=0\";q=0.9, gzip;q=0.8", ENCODING_ALL, ENCODING_BR },
        { "br junk, gzip", ENCODING_ALL, ENCODING_GZIP },
        { ",,, ,gzip,,", ENCODING_ALL, ENCODING_GZIP },
        { "\tbr\t;\tq=0.7", ENCODING_ALL, ENCODING_BR },
        { "gzip;q=0.001", ENCODING_ALL, ENCODING_GZIP },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum encoding got = accept_encoding_choose(cases[i].value, strlen(cases[i].value), cases[i].allowed);
        CHECK(got == cases[i].want, "\"%s\": got %d, want %d", cases[i].value, got, cases[i].want);
    }
    CHECK(accept_encoding_choose(NULL, 0, ENCODING_ALL) == ENCODING_NONE, "absent header");
    CHECK(strcmp(encoding_file_suffix(ENCODING_ZSTD), ".zst") == 0 && !encoding_file_suffix(ENCODING_NONE), "suffix");
    CHECK(strcmp(encoding_etag_suffix(ENCODING_GZIP), "-gz") == 0, "etag suffix");

    current = "media_type_compressible";
    struct { const char *type; bool want; } types[] = {
        { "text/html; charset=utf-8", true }, { "TEXT/CSS", true }, { "text/plain", true },
        { "application/json", true }, { "application/ld+json", true }, { "application/rss+xml", true },
        { "image/svg+xml", true }, { "application/wasm", true }, { "application/manifest+json", true },
        { "image/png", false }, { "application/octet-stream", false }, { "application/+json", false },
        { "text", false }, { "text/", false }, { "", false }, { "application/jsonx", false },
        { " text/html ;q", true }, { "text/html x", false },
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        CHECK(media_type_compressible(types[i].type, strlen(types[i].type), NULL, 0) == types[i].want,
              "\"%s\"", types[i].type);
    char *list[] = { "text/html", "application/*+json" };
    CHECK(media_type_compressible(S("text/html"), list, 2), "own list");
    CHECK(!media_type_compressible(S("text/css"), list, 2), "own list replaces the default");
    CHECK(media_type_compressible(S("application/vnd.api+json"), list, 2), "suffix wildcard");
}

static void test_conditional(void)
{
    current = "etag";
    char etag[ETAG_SIZE];
    size_t n = etag_format(etag, 0x5f3c, 0x1a2b, NULL);
    CHECK(n == 11 && strcmp(etag, "\"5f3c-1a2b\"") == 0, "%s", etag);
    n = etag_format(etag, 0x5f3c, 0x1a2b, "-br");
    CHECK(strcmp(etag, "\"5f3c-1a2b-br\"") == 0 && n == strlen(etag), "%s", etag);
    etag_format(etag, -1, UINT64_MAX, "-zst");
    CHECK(strcmp(etag, "\"ffffffffffffffff-ffffffffffffffff-zst\"") == 0, "%s", etag);

    const char *e = "\"5f3c-1a2b\"";
    size_t el = strlen(e);
    CHECK(etag_list_match(S("\"5f3c-1a2b\""), e, el, false), "strong");
    CHECK(etag_list_match(S(" \"x\" ,, \"5f3c-1a2b\" "), e, el, false), "in a list");
    CHECK(!etag_list_match(S("W/\"5f3c-1a2b\""), e, el, false), "weak tag, strong comparison");
    CHECK(etag_list_match(S("W/\"5f3c-1a2b\""), e, el, true), "weak tag, weak comparison");
    CHECK(etag_list_match(S("\"5f3c-1a2b\""), S("W/\"5f3c-1a2b\""), true), "weak current tag");
    CHECK(!etag_list_match(S("\"5f3c-1a2b\""), S("W/\"5f3c-1a2b\""), false), "weak current, strong");
    CHECK(etag_list_match(S(" * "), e, el, false), "star");
    CHECK(!etag_list_match(S("\"a\", *"), e, el, true), "star in a list is not a tag");
    CHECK(!etag_list_match(S("5f3c-1a2b"), e, el, true), "unquoted");
    CHECK(!etag_list_match(S("junk, \"5f3c-1a2b\""), e, el, true), "after garbage");
    CHECK(!etag_list_match(S("\"5f3c-1a2\""), e, el, true), "prefix");
    CHECK(!etag_list_match(S(""), e, el, true), "empty");

    current = "conditional_evaluate";
    time_t mtime = EXAMPLE;
    struct conditional_headers h = { 0 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "none");
    h = (struct conditional_headers){ .if_match = "\"other\"", .if_match_length = 7 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PRECONDITION_FAILED, "If-Match miss");
    h = (struct conditional_headers){ .if_match = e, .if_match_length = el,
                                      .if_unmodified_since = "Sat, 01 Jan 1994 00:00:00 GMT",
                                      .if_unmodified_since_length = 29 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "If-Match wins over IUS");
    h = (struct conditional_headers){ .if_unmodified_since = "Sat, 01 Jan 1994 00:00:00 GMT",
                                      .if_unmodified_since_length = 29 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PRECONDITION_FAILED, "IUS before");
    h.if_unmodified_since = "Sun, 06 Nov 1994 08:49:37 GMT";
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "IUS equal");
    h.if_unmodified_since = "garbage, not a date at all....";
    h.if_unmodified_since_length = 30;
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "IUS invalid");
    h = (struct conditional_headers){ .if_none_match = "W/\"5f3c-1a2b\"", .if_none_match_length = 13 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_NOT_MODIFIED, "INM weak");
    CHECK(conditional_evaluate(&h, false, e, el, mtime) == CONDITIONAL_PRECONDITION_FAILED, "INM POST");
    h = (struct conditional_headers){ .if_none_match = "*", .if_none_match_length = 1 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_NOT_MODIFIED, "INM star");
    h = (struct conditional_headers){ .if_none_match = "\"x\"", .if_none_match_length = 3,
                                      .if_modified_since = "Sun, 06 Nov 1994 08:49:37 GMT",
                                      .if_modified_since_length = 29 };
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "IMS ignored with INM");
    h.if_none_match = NULL;
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_NOT_MODIFIED, "IMS equal");
    CHECK(conditional_evaluate(&h, false, e, el, mtime) == CONDITIONAL_PROCEED, "IMS not for POST");
    CHECK(conditional_evaluate(&h, true, e, el, mtime + 1) == CONDITIONAL_PROCEED, "IMS modified");
    h.if_modified_since = "Sun, 06 Nov 1994 08:49:37 GMX";
    CHECK(conditional_evaluate(&h, true, e, el, mtime) == CONDITIONAL_PROCEED, "IMS invalid");

    current = "range_parse";
    struct { const char *v; uint64_t size; enum range_outcome want; uint64_t first, last; } r[] = {
        { "bytes=0-99", 1000, RANGE_ONE, 0, 99 },
        { "BYTES=0-99", 1000, RANGE_ONE, 0, 99 },
        { "bytes=500-", 1000, RANGE_ONE, 500, 999 },
        { "bytes=-100", 1000, RANGE_ONE, 900, 999 },
        { "bytes=-5000", 1000, RANGE_ONE, 0, 999 },
        { "bytes=990-5000", 1000, RANGE_ONE, 990, 999 },
        { "bytes=0-99999999999999999999999", 1000, RANGE_ONE, 0, 999 },
        { "bytes=999-999", 1000, RANGE_ONE, 999, 999 },
        { "bytes= 1-2 ,", 1000, RANGE_ONE, 1, 2 },
        { "bytes=1000-", 1000, RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=99999999999999999999999-", 1000, RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=-0", 1000, RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=0-0", 0, RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=-1", 0, RANGE_IGNORE, 0, 0 },
        { "bytes=0-1,3-4", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=5-4", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=a-b", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=-", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=1-2x", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes=+1-2", 1000, RANGE_IGNORE, 0, 0 },
        { "items=0-1", 1000, RANGE_IGNORE, 0, 0 },
        { "bytes 0-1", 1000, RANGE_IGNORE, 0, 0 },
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        uint64_t first = 0, last = 0;
        enum range_outcome got = range_parse(r[i].v, strlen(r[i].v), r[i].size, &first, &last);
        CHECK(got == r[i].want && (got != RANGE_ONE || (first == r[i].first && last == r[i].last)),
              "\"%s\" of %llu: got %d %llu-%llu", r[i].v, (unsigned long long)r[i].size, got,
              (unsigned long long)first, (unsigned long long)last);
    }
    uint64_t f, l;
    CHECK(range_parse(NULL, 0, 10, &f, &l) == RANGE_IGNORE, "absent");

    current = "if_range_holds";
    CHECK(if_range_holds(NULL, 0, e, el, mtime), "absent");
    CHECK(if_range_holds(e, el, e, el, mtime), "same etag");
    CHECK(!if_range_holds(S("W/\"5f3c-1a2b\""), e, el, mtime), "weak etag");
    CHECK(!if_range_holds(S("\"other\""), e, el, mtime), "other etag");
    CHECK(if_range_holds(S("Sun, 06 Nov 1994 08:49:37 GMT"), e, el, mtime), "equal date");
    CHECK(if_range_holds(S("Sunday, 06-Nov-94 08:49:37 GMT"), e, el, mtime), "RFC 850 date");
    CHECK(!if_range_holds(S("Wed, 09 Nov 1994 08:49:37 GMT"), e, el, mtime), "later date");
    CHECK(!if_range_holds(S("garbage"), e, el, mtime), "garbage");
}

static void test_mime(const char *dir)
{
    current = "mime";
    char path[512];
    snprintf(path, sizeof path, "%s/mime.types", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
    if (!f)
        return;
    fprintf(f, "# comment\napplication/x-evil js mjs\ntext/x-custom  custom CUS2 # trailing\n"
               "text/plain\ttext\nbad type here\napplication/json  jsn\nbad\x01/type evil\n"
               "image/x-long %0*d\n", 2000, 7);
    fprintf(f, "text/x-last last");   /* no newline at the end */
    fclose(f);
    struct mime_table *t = mime_table_load(path);
    CHECK(t != NULL, "load");
    if (!t)
        return;
    struct { const char *name, *want; } c[] = {
        { "index.html", "text/html; charset=utf-8" }, { "INDEX.HTM", "text/html; charset=utf-8" },
        { "app.js", "text/javascript; charset=utf-8" }, { "m.mjs", "text/javascript; charset=utf-8" },
        { "a/b.c/photo.JPG", "image/jpeg" }, { "x.custom", "text/x-custom" }, { "x.cus2", "text/x-custom" },
        { "a.text", "text/plain; charset=utf-8" }, { "a.jsn", "application/json; charset=utf-8" },
        { "noext", MIME_DEFAULT_TYPE }, { "dir.d/noext", MIME_DEFAULT_TYPE }, { "x.", MIME_DEFAULT_TYPE },
        { "x.unknown", MIME_DEFAULT_TYPE }, { "x.evil", MIME_DEFAULT_TYPE }, { "x.last", "text/x-last" },
        { "font.woff2", "font/woff2" }, { "s.svg", "image/svg+xml; charset=utf-8" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *got = mime_type_of(t, c[i].name, strlen(c[i].name));
        CHECK(strcmp(got, c[i].want) == 0, "%s: got %s", c[i].name, got);
    }
    mime_table_free(t);
    t = mime_table_load("/nonexistent/mime.types");
    CHECK(t && strcmp(mime_type_of(t, S("a.css")), "text/css; charset=utf-8") == 0, "built-ins alone");
    mime_table_free(t);
    /* A file past the cap: its lines beyond MIME_FILE_MAX are not read. */
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "text/x-first first\n");
        for (size_t written = 0; written < MIME_FILE_MAX; written += strlen("# padding padding.\n"))
            fprintf(f, "# padding padding.\n");
        fprintf(f, "text/x-after after\n");
        fclose(f);
    }
    t = mime_table_load(path);
    CHECK(t && strcmp(mime_type_of(t, S("a.first")), "text/x-first") == 0, "before the cap");
    CHECK(t && strcmp(mime_type_of(t, S("a.after")), MIME_DEFAULT_TYPE) == 0, "after the cap");
    mime_table_free(t);
    unlink(path);
}

static void test_decode(void)
{
    current = "file_path_decode";
    struct { const char *target; int status; const char *want; bool slash; } c[] = {
        { "/", 0, "", true }, { "/a/b.txt", 0, "a/b.txt", false }, { "//a///b/", 0, "a/b", true },
        { "/a%20b?x=../..", 0, "a b", false }, { "/%41%62c", 0, "Abc", false }, { "/%25", 0, "%", false },
        { "/caf%C3%A9", 0, "caf\xc3\xa9", false }, { "/a..b", 0, "a..b", false }, { "/a/b.", 0, "a/b.", false },
        { "/..", 404, NULL, false }, { "/a/../b", 404, NULL, false }, { "/./a", 404, NULL, false },
        { "/%2e%2e/x", 404, NULL, false }, { "/%2E/x", 404, NULL, false }, { "/.git/config", 404, NULL, false },
        { "/a/.env", 404, NULL, false }, { "/a%2Fb", 404, NULL, false }, { "/a%2fb", 404, NULL, false },
        { "/a%00b", 404, NULL, false }, { "/a%", 404, NULL, false }, { "/a%4", 404, NULL, false },
        { "/a%zz", 404, NULL, false }, { "a/b", 404, NULL, false }, { "", 404, NULL, false },
        { "?x", 404, NULL, false }, { "/%2e", 404, NULL, false },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char out[64] = "";
        bool slash = false;
        int got = file_path_decode(c[i].target, strlen(c[i].target), out, sizeof out, &slash);
        CHECK(got == c[i].status && (got != 0 || (strcmp(out, c[i].want) == 0 && slash == c[i].slash)),
              "\"%s\": got %d \"%s\" slash %d", c[i].target, got, out, slash);
    }
    bool ignored;
    char nul[16];
    CHECK(file_path_decode("/a\0b", 4, nul, sizeof nul, &ignored) == 404, "a raw NUL");
    char small[4];
    bool slash;
    CHECK(file_path_decode(S("/abcd"), small, sizeof small, &slash) == 404, "too long for out");
    CHECK(file_path_decode(S("/ab"), small, sizeof small, &slash) == 0 && strcmp(small, "ab") == 0, "fits");
}

/* Makes the tree under dir (root/ and secret.txt beside it). */
static int make_tree(const char *dir)
{
    char p[512];
#define P(...) (snprintf(p, sizeof p, __VA_ARGS__), p)
    int ok = mkdir(P("%s/root", dir), 0755) == 0 && mkdir(P("%s/root/docs", dir), 0755) == 0 &&
             mkdir(P("%s/root/empty", dir), 0755) == 0 && mkdir(P("%s/root/.git", dir), 0755) == 0 &&
             mkdir(P("%s/root/docs/index.html", dir), 0755) == 0 &&
             mkfifo(P("%s/root/fifo", dir), 0644) == 0 &&
             symlink("hello.txt", P("%s/root/inside-link", dir)) == 0 &&
             symlink("docs", P("%s/root/dir-link", dir)) == 0 &&
             symlink("../secret.txt", P("%s/root/outside-link", dir)) == 0 &&
             symlink("/etc", P("%s/root/etc-link", dir)) == 0 &&
             mkdir(P("%s/root/locked", dir), 0755) == 0 &&
             mkdir(P("%s/root/.well-known", dir), 0755) == 0 &&
             mkdir(P("%s/root/docs/.well-known", dir), 0755) == 0;
    static const char *const files[][2] = {
        { "secret.txt", "secret" }, { "root/hello.txt", "hello" }, { "root/hello.txt.br", "br!" },
        { "root/.env", "KEY=1" }, { "root/.git/config", "[core]" }, { "root/index.html", "<h1>top</h1>" },
        { "root/docs/guide.html", "guide" }, { "root/locked/file", "x" },
        { "root/.well-known/security.txt", "contact" }, { "root/.well-known/.hidden", "h" },
        { "root/docs/.well-known/x", "x" },
    };
    for (size_t i = 0; ok && i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(P("%s/%s", dir, files[i][0]), "w");
        ok = f && fputs(files[i][1], f) >= 0 && fclose(f) == 0;
    }
    /* docs/index.html was made a directory above (not a file): docs/ is
     * then 404. "empty/" has no index at all. */
    ok = ok && chmod(P("%s/root/locked/file", dir), 0) == 0;
#undef P
    return ok ? 0 : -1;
}

/* Reads what fd holds from its start into buf (NUL-terminated). */
static const char *contents(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* The filesystem cases, with openat2 unless walk. */
static void test_open(const char *dir, bool walk)
{
    current = walk ? "file_open (walk)" : "file_open (openat2)";
    char p[512];
    snprintf(p, sizeof p, "%s/root", dir);
    int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(root >= 0, "open %s: %s", p, strerror(errno));
    if (root < 0)
        return;
    bool root_user = geteuid() == 0;
    struct { const char *target; int status; const char *body; } c[] = {
        { "/hello.txt", 200, "hello" }, { "//hello.txt?x=1", 200, "hello" }, { "/hell%6F.txt", 200, "hello" },
        { "/", 200, "<h1>top</h1>" }, { "/docs/guide.html", 200, "guide" },
        { "/docs", 301, "/docs/" }, { "/docs?a=b", 301, "/docs/?a=b" }, { "/docs/", 404, NULL },
        { "/empty/", 404, NULL }, { "/empty", 301, "/empty/" }, { "/hello.txt/", 404, NULL },
        { "/missing", 404, NULL }, { "/missing/x", 404, NULL }, { "/hello.txt/x", 404, NULL },
        { "/.env", 404, NULL }, { "/.git/config", 404, NULL }, { "/../secret.txt", 404, NULL },
        { "/%2e%2e/secret.txt", 404, NULL }, { "/fifo", 404, NULL },
        { "/.well-known/security.txt", 200, "contact" }, { "/docs/.well-known/x", 404, NULL },
        { "/.well-known/.hidden", 404, NULL }, { "//docs", 301, "/docs/" }, { "///docs?q", 301, "/docs/?q" },
        { "/outside-link", 404, NULL }, { "/etc-link/passwd", 404, NULL },
        { "/inside-link", walk ? 404 : 200, "hello" }, { "/dir-link/guide.html", walk ? 404 : 200, "guide" },
        { "/locked/file", root_user ? 200 : 403, "x" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct file_found found;
        int got = file_open(root, c[i].target, strlen(c[i].target), &found);
        char buf[64] = "";
        CHECK(got == c[i].status, "%s: got %d, want %d (error %d)", c[i].target, got, c[i].status, found.error);
        if (got == 200) {
            CHECK(found.fd >= 0 && S_ISREG(found.st.st_mode) && found.path &&
                  strcmp(contents(found.fd, buf, sizeof buf), c[i].body) == 0,
                  "%s: body \"%s\"", c[i].target, buf);
            int flags = fcntl(found.fd, F_GETFL);
            CHECK(flags >= 0 && (flags & O_NONBLOCK), "%s: not O_NONBLOCK", c[i].target);
        } else {
            CHECK(found.fd == -1 && !found.path, "%s: holds something on %d", c[i].target, got);
        }
        if (got == 301)
            CHECK(found.location && strcmp(found.location, c[i].body) == 0, "%s: Location %s", c[i].target,
                  found.location ? found.location : "(none)");
        file_found_release(&found);
        CHECK(found.fd == -1 && !found.path && !found.location, "released");
    }
    struct file_found found, variant;
    CHECK(file_open(root, S("/hello.txt"), &found) == 200 && strcmp(found.path, "hello.txt") == 0, "path");
    CHECK(file_open_variant(root, found.path, ".br", &variant) == 200 &&
          strcmp(contents(variant.fd, p, sizeof p), "br!") == 0 && strcmp(variant.path, "hello.txt.br") == 0,
          "the .br sibling");
    file_found_release(&variant);
    CHECK(file_open_variant(root, found.path, ".gz", &variant) == 404 && variant.fd == -1, "no .gz sibling");
    file_found_release(&found);
    CHECK(file_open(root, S("/"), &found) == 200 && strcmp(found.path, "index.html") == 0, "index path %s",
          found.path ? found.path : "(none)");
    file_found_release(&found);
    CHECK(file_open_variant(root, "docs", "", &variant) == 404, "a directory is no variant");
    close(root);
}

/* Runs test_open in a child (the choice of method is made once per
 * process); its failures become ours. */
static void open_in_child(const char *dir, bool walk)
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (walk)
            setenv("RSP_NO_OPENAT2", "1", 1);
        failures = 0;
        test_open(dir, walk);
        _exit(failures ? 1 : 0);
    }
    int status = 0;
    current = "fork";
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the %s child failed (status %d)", walk ? "walk" : "openat2", status);
}

int main(void)
{
    test_http_date();
    test_accept_encoding();
    test_conditional();
    test_decode();
    char dir[] = "/tmp/rsp-test-files-XXXXXX";
    current = "setup";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    test_mime(dir);
    CHECK(make_tree(dir) == 0, "making the tree in %s: %s", dir, strerror(errno));
    struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH };
    long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
    if (fd >= 0) {
        close((int)fd);
        open_in_child(dir, false);
    } else {
        printf("openat2 unavailable here (%s): only the walk is tested\n", strerror(errno));
    }
    open_in_child(dir, true);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s && rm -rf %s", dir, dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failures) {
        printf("test_files: %d checks FAILED\n", failures);
        return 1;
    }
    printf("test_files: all checks passed\n");
    return 0;
}
