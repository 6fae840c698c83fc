/* test_limit.c -- limit.c's table and token bucket, with a clock of the
 * test's own (ASan+UBSan): exact counts of a bucket's burst and refill,
 * Retry-After, one budget per address and level, IPv6 keyed by its /64,
 * the once-a-second log verdict, limit_conn's counts and a dead process's
 * column cleared (and the locks it held freed), and 50,000 distinct keys through the bounded table
 * (entries never above LIMIT_SLOTS, every key an entry or an eviction)
 * with a hot key that keeps its bucket all along. */
#include "check.h"

#include "limit.h"
#include "stats.h"

#include <stdio.h>
#include <string.h>

static const char *current;
static int failures;

#define SECOND 1000000000LL

static struct limit_key key(const char *address, uint32_t level)
{
    struct limit_key k;

    CHECK(limit_key_of(address, level, &k) == 0, "%s is an address", address);
    return k;
}

/* Takes n tokens at time t; returns how many were allowed. */
static int take(const struct limit_key *k, double rate, unsigned burst, int64_t t, int n)
{
    int allowed = 0;

    for (int i = 0; i < n; i++)
        allowed += limit_take(k, rate, burst, t).allowed;
    return allowed;
}

static void test_bucket(void)
{
    current = "bucket";
    struct limit_key a = key("192.0.2.1", 7);
    int64_t t = 1000 * SECOND;

    CHECK(take(&a, 2, 3, t, 10) == 3, "a fresh key gets its burst");
    struct limit_verdict v = limit_take(&a, 2, 3, t);
    CHECK(!v.allowed && v.retry_after == 1, "retry after %u", v.retry_after);
    CHECK(take(&a, 2, 3, t + SECOND / 2, 5) == 1, "half a second at 2/s: one token");
    CHECK(take(&a, 2, 3, t + 10 * SECOND, 10) == 3, "a long wait refills to the burst, no more");
    /* A reading a little behind another worker's takes nothing back. */
    CHECK(take(&a, 2, 3, t + 9 * SECOND, 1) == 0, "an earlier time adds no token");

    struct limit_key slow = key("192.0.2.2", 7);
    CHECK(take(&slow, 1.0 / 3600, 1, t, 2) == 1, "one token an hour");
    v = limit_take(&slow, 1.0 / 3600, 1, t + SECOND);
    CHECK(v.retry_after == 3599, "retry after %u, not 3599", v.retry_after);
}

static void test_keys(void)
{
    current = "keys";
    int64_t t = 2000 * SECOND;
    struct limit_key one = key("2001:db8:1:2:aaaa::1", 9), same = key("2001:db8:1:2:bbbb::2", 9);
    struct limit_key next = key("2001:db8:1:3::1", 9), other_level = key("2001:db8:1:2::1", 10);
    struct limit_key bad;

    CHECK(memcmp(&one, &same, sizeof one) == 0, "one /64, one key");
    CHECK(take(&one, 1e-6, 2, t, 1) + take(&same, 1e-6, 2, t, 5) == 2, "a /64 shares one bucket");
    CHECK(take(&next, 1e-6, 2, t, 5) == 2, "the next /64 has its own");
    CHECK(take(&other_level, 1e-6, 2, t, 5) == 2, "another level has its own");
    CHECK(limit_key_of("not an address", 1, &bad) == -1, "text that is no address");
    struct limit_key v4 = key("192.0.2.77", 9), mapped = key("::ffff:192.0.2.77", 9);
    struct limit_key mapped_other = key("::ffff:192.0.2.78", 9);
    CHECK(memcmp(&v4, &mapped, sizeof v4) == 0, "an IPv4-mapped address is its IPv4 address");
    CHECK(memcmp(&mapped, &mapped_other, sizeof v4) != 0, "two IPv4-mapped addresses, two keys");
}

static void test_log_verdict(void)
{
    current = "log once a second";
    struct limit_key a = key("198.51.100.1", 3);
    int64_t t = 3000 * SECOND;

    take(&a, 1e-6, 1, t, 1);
    struct limit_verdict v = limit_take(&a, 1e-6, 1, t);
    CHECK(v.log && v.refused == 1, "the first refusal is logged (%d, %u)", v.log, v.refused);
    CHECK(take(&a, 1e-6, 1, t + SECOND / 2, 3) == 0, "still none");
    v = limit_take(&a, 1e-6, 1, t + SECOND / 2);
    CHECK(!v.log, "not twice in a second");
    v = limit_take(&a, 1e-6, 1, t + SECOND);
    CHECK(v.log && v.refused == 5, "a second later: the 5 refusals since (%d, %u)", v.log, v.refused);
}

static void test_connections(void)
{
    current = "limit_conn";
    struct limit_key a = key("203.0.113.9", LIMIT_LEVEL_CONN);
    int64_t t = 4000 * SECOND;

    stats_use_row(3);
    CHECK(limit_conn_open(&a, t) == 1, "first");
    CHECK(limit_conn_open(&a, t) == 2, "second");
    stats_use_row(5);
    CHECK(limit_conn_open(&a, t) == 3, "another process's");
    limit_conn_close(&a);
    CHECK(limit_conn_open(&a, t) == 3, "closed and opened again");
    limit_clear_column(3); /* process 3 died */
    CHECK(limit_conn_open(&a, t) == 2, "the dead process's two are gone");
    stats_use_row(3);
    limit_conn_close(&a); /* a close of the dead column's counts nothing */
    stats_use_row(5);
    CHECK(limit_conn_open(&a, t) == 3, "nothing went below zero");
    stats_use_row(0);

    /* Process 7 killed while it held every set's lock (as if): the
     * master frees them, and nothing waits for ever. */
    struct limit_table *table = limit_shared();
    for (size_t i = 0; i < LIMIT_SETS; i++)
        atomic_store(&table->sets[i].lock, 7 + 1);
    limit_clear_column(7);
    CHECK(limit_conn_open(&a, t) == 4, "the locks of a dead process are freed");
}

static void test_many_keys(void)
{
    current = "50,000 keys";
    struct limit_table *table = limit_shared();
    struct limit_key hot = key("10.0.0.1", 11);
    int64_t t = 5000 * SECOND, before = atomic_load(&table->addresses);
    uint64_t evicted = atomic_load(&table->evictions);
    int hot_allowed = take(&hot, 1e-6, 2, t, 3);

    CHECK(hot_allowed == 2, "the hot key's burst");
    for (int i = 0; i < 50000; i++) {
        char text[32];
        struct limit_key k;

        snprintf(text, sizeof text, "100.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
        k = key(text, 11);
        t += 1000; /* a microsecond apart: the hot key stays the more recent */
        CHECK(limit_take(&k, 1e-6, 2, t).allowed, "a new key %s has a token", text);
        if (i % 100 == 0)
            CHECK(!limit_take(&hot, 1e-6, 2, t).allowed, "the hot key stays limited (%d keys in)", i);
    }
    int64_t in_use = atomic_load(&table->addresses);
    uint64_t evictions = atomic_load(&table->evictions) - evicted;
    CHECK(in_use <= LIMIT_SLOTS, "%lld entries", (long long)in_use);
    CHECK((uint64_t)(in_use - before) + evictions == 50001, "every key an entry or an eviction: %lld + %llu",
          (long long)(in_use - before), (unsigned long long)evictions);
    CHECK(!limit_take(&hot, 1e-6, 2, t).allowed, "the hot key is still limited");
    printf("50,000 keys: %lld entries in use, %llu evictions, %zu bytes of table\n", (long long)in_use,
           (unsigned long long)evictions, sizeof *table);
}

int main(void)
{
    if (stats_init() == -1 || limit_init() == -1)
        return 2;
    test_bucket();
    test_keys();
    test_log_verdict();
    test_connections();
    test_many_keys();
    limit_close();
    stats_close();
    printf("test_limit: %s\n", failures == 0 ? "all checks passed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
