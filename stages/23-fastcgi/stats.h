/* stats.h -- what rsp counts, in memory every process of rsp shares.
 *
 * With workers (chapter 13) the status page is served by the master while
 * the workers serve clients, so whatever is counted must be visible to all
 * of them: the counters live in one shared anonymous mapping, made before
 * the first fork, so every process sees the same pages.
 *
 * Three kinds of figures, three ways of writing them:
 * - per process (a row): bytes, connections and requests in flight,
 *   requests by protocol, HTTP/2 connections and streams. They change on
 *   every read and write, so each process writes only its own row, with
 *   plain loads and stores (no locked instruction, no cache line
 *   bouncing between cores); readers add the rows up. When a worker dies
 *   its gauges are zeroed (what it held is gone) and its counters stay.
 * - per site and status code, per backend, per timeout kind: counters
 *   every process adds to with a relaxed atomic add, once per request;
 *   so are the latency histograms, a site's request durations and a
 *   backend's response times (one bucket and the sum, once per request).
 * - shared state: a backend's passive health (down, and until when) and
 *   its active health (checked, failing), so that what one worker learns
 *   all of them know.
 *
 * Sites and backends find their slot by name (and, for a backend, its
 * resolved addresses): the same backend in two generations, or in two
 * processes, counts in one place. Slots are never given back, so a
 * counter never goes down; when the table is full, further ones count in
 * a private slot no one reads (logged once). */
#ifndef RSP_STATS_H
#define RSP_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_ROWS 128          /* processes counting at once: workers, old and new */
#define STATS_SITES 256
#define STATS_BACKENDS 1024
#define STATS_NAME 256
#define STATS_FIRST_CODE 100    /* status codes 100..999 */
#define STATS_CODES 900
#define STATS_ENCODINGS 4       /* enum encoding's values (encoder.h) */

/* The histograms' buckets: upper bounds in seconds, 5 ms to 10 s (what
 * Prometheus's client libraries use), and a last bucket without bound. */
#define STATS_BUCKETS 12
extern const double stats_bucket_bounds[STATS_BUCKETS - 1];

/* Why rsp refused a client (chapter 22), for status.json's "limits" and
 * /metrics' rsp_refused_total; stats_refused_names in this order. */
enum stats_refused { REFUSED_LIMIT_REQ, REFUSED_LIMIT_CONN, REFUSED_DENY, REFUSED_AUTH,
                     REFUSED_BODY_SIZE, REFUSED_PROXY_PROTOCOL, REFUSED_REASONS };
extern const char *const stats_refused_names[REFUSED_REASONS];

enum stats_timeout { TIMEOUT_CONNECT, TIMEOUT_HEADER, TIMEOUT_BODY, TIMEOUT_RESPONSE, TIMEOUT_IDLE,
                     TIMEOUT_KINDS };

/* One process's own figures, on a cache line of their own: two workers
 * writing to one line would make the cores pass it back and forth on
 * every read and write. */
struct stats_row {
    _Alignas(64) _Atomic uint64_t bytes_in; /* read from clients */
    _Atomic uint64_t bytes_out;     /* written to clients */
    _Atomic int64_t connections;    /* client connections open */
    _Atomic int64_t in_flight;      /* requests begun and not finished */
    _Atomic uint64_t tls_handshakes; /* TLS handshakes completed (chapter 14) */
    _Atomic uint64_t tls_failures;  /* and failed */
    _Atomic uint64_t bytes_spliced; /* of bytes_out, those moved by splice (chapter 16) */
    _Atomic int64_t pipes;          /* pipes open for splice, in use or idle */
    _Atomic uint64_t bodies_buffered; /* request bodies read whole before a backend (chapter 17) */
    _Atomic uint64_t spooled_in;    /* request body bytes written to temporary files */
    _Atomic uint64_t spooled_out;   /* response bytes written to temporary files */
    _Atomic int64_t temp_files;     /* temporary files open */
    _Atomic uint64_t requests_http1; /* requests answered over HTTP/1.x (chapter 20) */
    _Atomic uint64_t requests_http2; /* and over HTTP/2, one per stream */
    _Atomic int64_t h2_connections; /* client connections speaking HTTP/2 */
    _Atomic int64_t h2_streams;     /* HTTP/2 streams open */
    _Atomic uint64_t compressed[STATS_ENCODINGS]; /* responses compressed, by enum encoding
                                                     (encoder.h; [0] unused) (chapter 21) */
    _Atomic uint64_t compress_in;   /* body bytes they had before */
    _Atomic uint64_t compress_out;  /* and after */
    _Atomic int64_t encoders;       /* encoders alive in this process (encoder_totals) */
    _Atomic int64_t encoder_memory; /* the bytes they hold */
};

/* Durations counted by bucket: buckets[i] counts those in
 * (bounds[i-1], bounds[i]], not cumulative (whoever shows them adds up:
 * a reader sees bucket counts that only grow); the sum in microseconds
 * (58 years of durations at 10,000 s a second before it wraps). */
struct stats_histogram {
    _Atomic uint64_t buckets[STATS_BUCKETS];
    _Atomic uint64_t sum_us;
};

struct stats_site {
    _Atomic int state;              /* 0 free, 1 being claimed, 2 in use */
    char name[STATS_NAME];
    _Atomic uint64_t codes[STATS_CODES];
    struct stats_histogram duration; /* a request's first byte to its response's last */
    _Atomic uint64_t refused[REFUSED_REASONS]; /* its requests refused, by reason */
};

struct stats_backend {
    _Atomic int state;              /* as for sites */
    char name[STATS_NAME];
    uint64_t addresses;             /* a hash of its resolved addresses */
    _Atomic uint64_t requests;      /* sent to it */
    _Atomic uint64_t failures;      /* connects that failed or timed out */
    struct stats_histogram response_time; /* request head sent to response head read */
    _Atomic bool down;              /* passive health: a connect failed recently */
    _Atomic double retry_at;        /* while down: when to try it again (monotonic s) */
    _Atomic bool checked;           /* active checks run */
    _Atomic bool failing;           /* active checks say it is down */
    _Atomic int32_t active[STATS_ROWS]; /* requests in flight to it, per process */
    _Atomic int32_t idle[STATS_ROWS];   /* its connections in the idle pool, per process */
};

struct stats {
    _Atomic uint64_t timeouts[TIMEOUT_KINDS];
    _Atomic uint64_t refused[REFUSED_REASONS]; /* clients refused, by reason, every site's and none's */
    struct stats_row rows[STATS_ROWS];
    struct stats_site sites[STATS_SITES];
    struct stats_backend backends[STATS_BACKENDS];
};

/* Maps the shared memory (zeroed) and makes this process count in row 0.
 * Call once, before any fork (stats_site and stats_backend call it if
 * nobody has). Returns 0, or -1 after logging. */
int stats_init(void);

/* Unmaps it (at exit, so that a leak checker is content). */
void stats_close(void);

/* The shared figures; NULL before stats_init. */
struct stats *stats_shared(void);

/* The row this process counts in (row 0 until stats_use_row). */
struct stats_row *stats_row(void);
int stats_row_index(void);
void stats_use_row(int row);

/* The slot of site `name` (or of backend `name` whose addresses hash to
 * `addresses`), claimed if it has none yet. Never NULL. */
struct stats_site *stats_site(const char *name);
struct stats_backend *stats_backend(const char *name, uint64_t addresses);

/* Adds n to a counter that only this process writes (a row's). */
static inline void stats_add_own(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline void stats_gauge_own(_Atomic int64_t *gauge, int64_t delta)
{
    atomic_store_explicit(gauge, atomic_load_explicit(gauge, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* Sets a gauge that only this process writes (a row's). */
static inline void stats_set_own(_Atomic int64_t *gauge, int64_t value)
{
    atomic_store_explicit(gauge, value, memory_order_relaxed);
}

/* Adds n to a counter any process may add to. */
static inline void stats_add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* Counts a finished request of `site` answered with `status`. */
void stats_count_request(struct stats_site *site, int status);

/* Counts a request answered (as stats_count_request does, once per
 * request) by the protocol it came in: HTTP/2 or HTTP/1.x. */
void stats_count_protocol(bool http2);

/* Counts a duration of `seconds` (>= 0) in h. */
void stats_observe(struct stats_histogram *h, double seconds);

/* Counts a timeout. */
void stats_count_timeout(enum stats_timeout kind);

/* Counts a client refused for `reason`, and for site if not NULL. */
void stats_count_refused(struct stats_site *site, enum stats_refused reason);

/* A backend's requests in flight, all processes together. */
int64_t stats_backend_in_flight(const struct stats_backend *b);

/* A backend's idle pooled connections, all processes together. */
int64_t stats_backend_idle(const struct stats_backend *b);

/* Zeroes the gauges of a row whose process has gone. */
void stats_clear_row(int row);

#endif
