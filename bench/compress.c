/* compress.c -- what each compression level and window costs rsp's
 * encoders (src/encoder.c): ratio, CPU per MiB and memory per encoder.
 *
 * The page (a file given, else a ~100 KiB HTML page made here, the same
 * every run) is compressed as rsp streams a body: 16 KiB writes, a flush
 * every 64 KiB, then the finish. For every encoding and level (gzip 1..9,
 * Brotli 0..11 at rsp's window and at Brotli's default 22, zstd 1..19) and
 * for a sweep of windows at rsp's level, it prints a Markdown table row:
 * the ratio (input over output), the CPU time per MiB of input (the
 * median of several runs, each long enough for the process CPU clock to
 * resolve), and the peak of encoder_memory over the stream. Built and run
 * by bench/compress. */
#include "encoder.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WRITE_SIZE 16384
#define FLUSH_EVERY 65536
#define RUNS 5

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* Deterministic pseudo-random numbers (xorshift64). */
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Appends a formatted string to the page. */
static void put(char **page, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void put(char **page, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(*page + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if ((size_t)n < *cap - *len)
            break;
        *cap *= 2;
        *page = realloc(*page, *cap);
        if (*page == NULL)
            abort();
    }
    *len += (size_t)n;
}

static const char *words[] = {
    "proxy", "server", "request", "response", "connection", "client", "backend", "header", "body",
    "stream", "window", "memory", "buffer", "socket", "kernel", "event", "timer", "deadline", "pool",
    "the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "by", "at",
    "from", "which", "when", "each", "every", "once", "before", "after", "until", "while", "not",
    "reads", "writes", "sends", "waits", "closes", "opens", "keeps", "drops", "counts", "measures",
    "fast", "slow", "small", "large", "idle", "busy", "new", "old", "first", "last", "next", "whole",
    "configuration", "compression", "certificate", "handshake", "negotiation", "benchmark", "latency",
    "throughput", "allocation", "reactor", "listener", "worker", "process", "signal", "reload",
    "Lisbon", "Tuesday", "November", "HTTP/2", "TLS", "gzip", "Brotli", "zstd", "nginx", "Caddy",
};

/* One word, chosen with a skew towards the start of the list (as real
 * text repeats its common words). */
static const char *word(void)
{
    size_t n = sizeof words / sizeof words[0];
    size_t a = rng() % n, b = rng() % n;

    return words[a < b ? a : b];
}

/* A sentence of 6 to 20 words, sometimes with a number or a link. */
static void sentence(char **p, size_t *len, size_t *cap)
{
    int n = 6 + (int)(rng() % 15);

    for (int i = 0; i < n; i++) {
        const char *w = word();

        if (i == 0)
            put(p, len, cap, "%c%s", w[0] >= 'a' && w[0] <= 'z' ? w[0] - 32 : w[0], w + 1);
        else if (rng() % 23 == 0)
            put(p, len, cap, " <a href=\"/%s/%s-%u.html\">%s %s</a>", word(), word(), (unsigned)(rng() % 1000), w,
                word());
        else if (rng() % 17 == 0)
            put(p, len, cap, " %u.%u %s", (unsigned)(rng() % 10000), (unsigned)(rng() % 100), w);
        else
            put(p, len, cap, " %s", w);
    }
    put(p, len, cap, "%s", rng() % 5 == 0 ? "? " : ". ");
}

/* A ~100 KiB HTML page: a head with inline CSS and JavaScript, a
 * navigation list, articles of paragraphs, tables of figures. */
static char *make_page(size_t *len)
{
    size_t cap = 1 << 17;
    char *p = malloc(cap);

    if (p == NULL)
        abort();
    *len = 0;
    put(&p, len, &cap, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<title>rsp: a proxy, chapter by chapter</title>\n<style>\n");
    for (int i = 0; i < 60; i++)
        put(&p, len, &cap, ".%s-%s%d { margin: %upx %upx; color: #%06x; font-size: %u.%uem; }\n", word(), word(), i,
            (unsigned)(rng() % 40), (unsigned)(rng() % 40), (unsigned)(rng() % 0xffffff), (unsigned)(rng() % 3),
            (unsigned)(rng() % 10));
    put(&p, len, &cap, "</style>\n<script>\n");
    for (int i = 0; i < 25; i++)
        put(&p, len, &cap,
            "function %s_%s%d(el, n) {\n  const v = el.dataset.%s || %u;\n  if (n > %u) { el.classList.add('%s'); }\n"
            "  return fetch('/api/%s?id=' + (v * n + %u)).then(r => r.json());\n}\n",
            word(), word(), i, word(), (unsigned)(rng() % 500), (unsigned)(rng() % 50), word(), word(),
            (unsigned)(rng() % 9999));
    put(&p, len, &cap, "</script>\n</head>\n<body>\n<nav><ul>\n");
    for (int i = 0; i < 40; i++)
        put(&p, len, &cap, "  <li><a href=\"/chapters/%02d-%s-%s/\" class=\"nav-%s\">%s %s</a></li>\n", i, word(), word(),
            word(), word(), word());
    put(&p, len, &cap, "</ul></nav>\n<main>\n");
    for (int a = 0; *len < 100 * 1024; a++) {
        put(&p, len, &cap, "<article id=\"a%d\" class=\"%s %s\">\n<h2>%s %s %s</h2>\n", a, word(), word(), word(),
            word(), word());
        for (int k = (int)(rng() % 4) + 2; k > 0; k--) {
            put(&p, len, &cap, "<p>");
            for (int s = (int)(rng() % 5) + 2; s > 0; s--)
                sentence(&p, len, &cap);
            put(&p, len, &cap, "</p>\n");
        }
        if (a % 3 == 0) {
            put(&p, len, &cap, "<table class=\"figures\">\n<tr><th>%s</th><th>%s</th><th>%s</th></tr>\n", word(), word(),
                word());
            for (int r = 0; r < 6; r++)
                put(&p, len, &cap, "<tr><td>%s</td><td>%u</td><td>%u.%02u ms</td></tr>\n", word(),
                    (unsigned)(rng() % 100000), (unsigned)(rng() % 100), (unsigned)(rng() % 100));
            put(&p, len, &cap, "</table>\n");
        }
        put(&p, len, &cap, "</article>\n");
    }
    put(&p, len, &cap, "</main>\n<footer><p>Generated by bench/compress.</p></footer>\n</body>\n</html>\n");
    return p;
}

/* Compresses the page once as rsp streams it. Returns the compressed size
 * (0 on a failure) and sets *peak to the encoder's largest memory. */
static size_t stream_once(const char *page, size_t len, enum encoding e, const struct encoder_params *params,
                          size_t *peak)
{
    struct encoder *enc = encoder_new_params(e, params);
    struct buffer out = BUFFER_INIT;
    size_t total = 0, since_flush = 0;
    int rc = 0;

    if (enc == NULL)
        return 0;
    *peak = encoder_memory(enc);
    for (size_t i = 0; i < len && rc == 0; i += WRITE_SIZE) {
        size_t n = len - i < WRITE_SIZE ? len - i : WRITE_SIZE;

        rc = encoder_write(enc, page + i, n, &out);
        since_flush += n;
        if (rc == 0 && since_flush >= FLUSH_EVERY) {
            rc = encoder_flush(enc, &out);
            since_flush = 0;
        }
        if (encoder_memory(enc) > *peak)
            *peak = encoder_memory(enc);
        total += buffer_length(&out);
        buffer_consume(&out, buffer_length(&out));
    }
    if (rc == 0)
        rc = encoder_finish(enc, &out);
    if (encoder_memory(enc) > *peak)
        *peak = encoder_memory(enc);
    total += buffer_length(&out);
    buffer_free(&out);
    encoder_free(enc);
    return rc == 0 ? total : 0;
}

static double cpu_seconds(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == -1) {
        perror("clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Measures one setting and prints its row. */
static void measure(const char *page, size_t len, enum encoding e, int level, int window, int mem_level)
{
    struct encoder_params params = { level, window, mem_level };
    double ms[RUNS];
    size_t out = 0, peak = 0;
    char what[40];

    for (int r = 0; r < RUNS; r++) {
        double start = cpu_seconds(), took;
        int times = 0;

        do {
            out = stream_once(page, len, e, &params, &peak);
            if (out == 0) {
                fprintf(stderr, "compress: %s level %d window %d failed\n", encoding_name(e), level, window);
                exit(1);
            }
            times++;
            took = cpu_seconds() - start;
        } while (took < 0.02);
        ms[r] = took * 1000 / times / ((double)len / (1024 * 1024));
    }
    qsort(ms, RUNS, sizeof ms[0], compare_doubles);
    if (e == ENCODING_GZIP)
        snprintf(what, sizeof what, "%d, memLevel %d", window, mem_level);
    else
        snprintf(what, sizeof what, "%d", window);
    printf("| %s | %d | %s | %.2f | %.1f | %.0f |\n", encoding_name(e), level, what, (double)len / (double)out,
           ms[RUNS / 2], (double)peak / 1024);
    fflush(stdout);
}

static void header(const char *title)
{
    printf("\n%s\n\n| encoding | level | window (log2) | ratio | CPU ms/MiB | peak memory KiB |\n"
           "|---|---:|---|---:|---:|---:|\n", title);
}

int main(int argc, char **argv)
{
    struct encoder_params g = encoder_defaults(ENCODING_GZIP), b = encoder_defaults(ENCODING_BR),
                          z = encoder_defaults(ENCODING_ZSTD);
    size_t len;
    char *page;

    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [PAGE.html]\n", argv[0]);
        return 2;
    }
    if (argc == 2) {
        FILE *f = fopen(argv[1], "rb");
        size_t cap = 1 << 20;

        if (f == NULL) {
            perror(argv[1]);
            return 1;
        }
        page = malloc(cap);
        if (page == NULL)
            return 1;
        len = fread(page, 1, cap, f);
        fclose(f);
        if (len == 0) {
            fprintf(stderr, "compress: %s is empty\n", argv[1]);
            return 1;
        }
    } else {
        page = make_page(&len);
    }
    if (getenv("COMPRESS_PAGE_OUT") != NULL) {
        FILE *f = fopen(getenv("COMPRESS_PAGE_OUT"), "wb");

        if (f == NULL || fwrite(page, 1, len, f) != len || fclose(f) != 0)
            perror(getenv("COMPRESS_PAGE_OUT"));
    }
    printf("Input: %s, %zu bytes, written in %d-byte pieces with a flush every %d bytes; CPU: median of %d "
           "runs.\n", argc == 2 ? argv[1] : "the generated HTML page", len, WRITE_SIZE, FLUSH_EVERY, RUNS);
    header("### gzip, levels 1..9 (windowBits 15, rsp's memLevel)");
    for (int l = 1; l <= 9; l++)
        measure(page, len, ENCODING_GZIP, l, g.window_log, g.mem_level);
    header("### Brotli, qualities 0..11, rsp's lgwin and the default 22");
    for (int l = 0; l <= 11; l++) {
        measure(page, len, ENCODING_BR, l, b.window_log, 0);
        measure(page, len, ENCODING_BR, l, 22, 0);
    }
    header("### zstd, levels 1..19 (rsp's windowLog)");
    for (int l = 1; l <= 19; l++)
        measure(page, len, ENCODING_ZSTD, l, z.window_log, 0);
    header("### Windows around rsp's levels");
    for (int m = 5; m <= 9; m++)
        measure(page, len, ENCODING_GZIP, g.level, 15, m);
    measure(page, len, ENCODING_GZIP, g.level, 13, g.mem_level);
    for (int l = 2; l <= 5; l++)
        for (int w = 16; w <= 22; w += l == b.level ? 1 : 2)
            measure(page, len, ENCODING_BR, l, w, 0);
    for (int l = 1; l <= 3; l++)
        for (int w = 14; w <= 22; w += l == z.level ? 1 : 2)
            measure(page, len, ENCODING_ZSTD, l, w, 0);
    free(page);
    return 0;
}
