/* limit.h -- how many requests and connections each client may have
 * (chapter 22): limit_req's token buckets and limit_conn's counts, in one
 * table every process of rsp shares.
 *
 * The table is a shared anonymous mapping made before the first fork, as
 * the counters of stats.h are, so one address has one budget whichever
 * worker its connections land on. It has a fixed size, LIMIT_SLOTS
 * entries, so that a crowd of addresses cannot make it grow: it is
 * set-associative, a key's hash (seeded at start, so nobody can aim at
 * one set) picks a set of LIMIT_WAYS entries, and a new key takes the
 * place of the set's least recently seen entry (one holding no open
 * connections, if the set has one). An evicted key starts afresh, with a
 * full bucket: that is what a bounded table gives up.
 *
 * Each set has a spinlock held for a few dozen instructions: find the
 * key, refill, take a token. Two workers meet on one set only when their
 * clients hash there at the same moment. The lock holds its holder's row
 * (stats.h) rather than a bare flag (an atomic_flag would do otherwise):
 * a worker killed while holding one would leave its set locked for ever,
 * so the master, told of the death, frees the locks of that row. */
#ifndef RSP_LIMIT_H
#define RSP_LIMIT_H

#include "stats.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define LIMIT_SLOTS 16384
#define LIMIT_WAYS 8
#define LIMIT_SETS (LIMIT_SLOTS / LIMIT_WAYS)
/* A column of connection counts per row of stats.h, that is per process
 * counting at once (workers old and new during a reload): the master
 * zeroes a dead worker's column, so its connections do not stay counted. */
#define LIMIT_COLUMNS STATS_ROWS

/* limit_conn's level: every level's limit_req has an id other than 0. */
#define LIMIT_LEVEL_CONN 0

/* A client as the table keys it: IPv4, its address; IPv6, its /64 (one
 * user holds 2^64 addresses); with the level whose budget it is. */
struct limit_key {
    uint32_t level;
    uint16_t family;            /* AF_INET, AF_INET6; 0: a free entry */
    uint16_t zero;
    uint8_t address[8];         /* IPv4: 4 bytes and 4 zeroes; IPv6: the /64 */
};

/* What is kept of one tracked key (its key is in its set's keys[]). */
struct limit_entry {
    double tokens;              /* what is left of the bucket, 0..burst */
    int64_t refilled;           /* when tokens was last brought up to date (monotonic ns) */
    int64_t seen;               /* last used (ns): the set's least recent goes first */
    int64_t logged;             /* the last log line of its refusals (ns) */
    uint32_t refused;           /* refusals since that line */
    uint32_t open;              /* connections open, all columns together */
    uint16_t connections[LIMIT_COLUMNS];
};

/* The keys apart from the rest, 128 bytes together: a look-up reads two
 * cache lines, not eight entries' worth (bench/limits). */
struct limit_set {
    _Alignas(64) struct limit_key keys[LIMIT_WAYS];
    _Atomic int lock;           /* 0: free; else the holder's stats row + 1 */
    struct limit_entry entries[LIMIT_WAYS];
};

struct limit_table {
    uint64_t seed;              /* of the hash, random, chosen before the first fork */
    _Atomic int64_t addresses;  /* entries in use */
    _Atomic uint64_t evictions; /* keys pushed out by newer ones */
    struct limit_set sets[LIMIT_SETS];
};

/* What limit_take decided. */
struct limit_verdict {
    bool allowed;
    unsigned retry_after;       /* refused: seconds until a token, at least 1 */
    bool log;                   /* refused, and no line for this address in the last second */
    uint32_t refused;           /* then: the refusals that line counts (this one included) */
};

/* Maps the table (zeroed, its hash seeded at random). Call once, before
 * any fork. Returns 0, or -1 after logging. */
int limit_init(void);

/* Logs the table's size (once the config is read). */
void limit_log_size(void);

/* Unmaps it (at exit). */
void limit_close(void);

/* The table; NULL before limit_init. */
struct limit_table *limit_shared(void);

/* The key of the client whose address is `text` (IPv4 or IPv6, as
 * relay.h's client_address holds it) at `level`. Returns 0, or -1 if text
 * is no address (then nothing limits it). */
int limit_key_of(const char *text, uint32_t level, struct limit_key *key);

/* A level's id (site_output.h's limit_req_settings) from the name of its setting ("limit_req", "pools.api.limit_req"...). */
uint32_t limit_level(const char *setting);

/* The monotonic clock in nanoseconds. */
int64_t limit_now(void);

/* Takes a token from key's bucket (rate a second, burst at most) at time
 * now (monotonic ns). */
struct limit_verdict limit_take(const struct limit_key *key, double rate, unsigned burst, int64_t now);

/* Counts a connection of key's in this process's column; returns the
 * address's open connections, all processes together, this one included. */
unsigned limit_conn_open(const struct limit_key *key, int64_t now);

/* Uncounts a connection limit_conn_open counted. */
void limit_conn_close(const struct limit_key *key);

/* Frees the locks process `row` held and zeroes its column: it died.
 * The master calls it. */
void limit_clear_column(int row);

#endif
