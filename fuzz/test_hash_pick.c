/* test_hash_pick.c -- balance = "hash" in pool.c (ASan+UBSan): the
 * choice is a function of the key and the backends' names alone (not of
 * their order, nor of earlier picks), 20,000 keys spread over 8 backends,
 * a backend removed or marked down (by active checks or passive health)
 * moves exactly its own keys, a retry goes to the next-highest score,
 * a backend added takes keys only for itself, and the hash's known
 * answers (a change would move every key of every deployment on upgrade). */
#include "check.h"

#include "pool.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *current;
static int failures;

#define COUNT 8
#define KEYS 20000

static struct backend backends[COUNT + 1];
static struct stats_backend rows[COUNT + 1];
static char names[COUNT + 1][32];

/* Backends "10.0.0.N:8080", each with its own (zeroed: up) health. */
static void make_backends(void)
{
    for (int i = 0; i <= COUNT; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:8080", i + 1);
        backends[i].name = names[i];
        backends[i].stats = &rows[i];
    }
}

/* A hash pool over `count` of the backends, listed as `order` says. */
static struct pool hash_pool(struct backend **list, const int *order, size_t count)
{
    for (size_t i = 0; i < count; i++)
        list[i] = &backends[order[i]];
    return (struct pool){ .backends = list, .count = count, .balance = BALANCE_HASH };
}

/* The key of number n, hashed as the exchange hashes a header's value. */
static uint64_t key_of(int n)
{
    char text[32];
    int length = snprintf(text, sizeof text, "user-%d", n);

    return pool_hash_of(text, (size_t)length);
}

static void test_known_answers(void)
{
    current = "known answers";
    /* Worked out apart from pool.c (FNV-1a's 64-bit offset basis and prime,
     * then splitmix64's finalizer, in Python): "" and "user-1", and the
     * score of backend "10.0.0.1:8080" for "user-1". */
    CHECK(pool_hash_of("", 0) == UINT64_C(0xf52a15e9a9b5e89b), "%#llx",
          (unsigned long long)pool_hash_of("", 0));
    CHECK(pool_hash_of("user-1", 6) == UINT64_C(0xc499b5f8a721df58), "%#llx",
          (unsigned long long)pool_hash_of("user-1", 6));
    CHECK(pool_hash_score(UINT64_C(0xc499b5f8a721df58), "10.0.0.1:8080") == UINT64_C(0x11f7dc1e12b6725f),
          "%#llx", (unsigned long long)pool_hash_score(UINT64_C(0xc499b5f8a721df58), "10.0.0.1:8080"));
    CHECK(pool_hash_of("a", 1) != pool_hash_of("b", 1), "a and b");
    CHECK(pool_hash_score(1, "x:1") != pool_hash_score(2, "x:1"), "keys 1 and 2");
    CHECK(pool_hash_score(1, "x:1") != pool_hash_score(1, "x:2"), "names x:1 and x:2");
}

static void test_deterministic_and_spread(void)
{
    static const int forward[COUNT] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    static const int shuffled[COUNT] = { 5, 2, 7, 0, 3, 6, 1, 4 };
    struct backend *a_list[COUNT], *b_list[COUNT];
    struct pool a = hash_pool(a_list, forward, COUNT), b = hash_pool(b_list, shuffled, COUNT);
    unsigned counts[COUNT] = { 0 };

    current = "deterministic and spread";
    for (int n = 0; n < KEYS; n++) {
        struct backend *first = backend_pick_keyed(&a, 0, key_of(n));
        struct backend *again = backend_pick_keyed(&a, 0, key_of(n));
        struct backend *other = backend_pick_keyed(&b, 0, key_of(n));

        CHECK(first != NULL && first == again, "key %d: %p then %p", n, (void *)first, (void *)again);
        CHECK(first == other, "key %d: the order of the list changed its backend", n);
        if (first != NULL)
            counts[first - backends]++;
    }
    for (int i = 0; i < COUNT; i++) /* 2,500 expected each */
        CHECK(counts[i] > KEYS / COUNT * 8 / 10 && counts[i] < KEYS / COUNT * 12 / 10,
              "backend %d got %u of %d keys", i, counts[i], KEYS);
}

/* How the keys move when backend `gone` is down as `mark` makes it
 * (removed from the list, or marked down in place): exactly its keys move,
 * each to the backend of its next-highest score (which a retry with
 * `gone` in tried reaches too). */
static void check_only_its_keys_move(int gone, int mark)
{
    static const int forward[COUNT] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    int without[COUNT - 1];
    struct backend *all_list[COUNT], *less_list[COUNT - 1];
    struct pool all = hash_pool(all_list, forward, COUNT);
    struct pool less;
    unsigned moved = 0, had = 0;

    for (int i = 0, j = 0; i < COUNT; i++)
        if (i != gone)
            without[j++] = i;
    less = hash_pool(less_list, without, COUNT - 1);
    for (int n = 0; n < KEYS; n++) {
        uint64_t key = key_of(n);
        struct backend *before, *after, *retry, *expected;

        rows[gone].failing = false;
        rows[gone].down = false;
        before = backend_pick_keyed(&all, 0, key);
        if (mark == 1)
            rows[gone].failing = true;
        else if (mark == 2) {
            rows[gone].down = true;
            rows[gone].retry_at = 1e12; /* not due for a retry */
        }
        after = mark == 0 ? backend_pick_keyed(&less, 0, key) : backend_pick_keyed(&all, 0, key);
        expected = backend_pick_keyed(&less, 0, key);
        retry = backend_pick_keyed(&all, backend_bit(&all, before), key);
        had += before == &backends[gone];
        moved += before != after;
        CHECK(after != &backends[gone], "key %d still on the backend that is down", n);
        CHECK(before == &backends[gone] || after == before, "key %d moved off backend %td", n,
              before - backends);
        CHECK(after == expected, "key %d: not the backend the list without it gives", n);
        if (before == &backends[gone])
            CHECK(retry == after, "key %d: the retry went to %td, the next-highest score is %td", n,
                  retry - backends, after - backends);
    }
    rows[gone].failing = false;
    rows[gone].down = false;
    CHECK(had > 0 && moved == had, "%u keys moved, backend %d had %u", moved, gone, had);
}

static void test_removal(void)
{
    static const char *const kinds[] = { "removed", "failing its checks", "down by passive health" };

    for (int mark = 0; mark < 3; mark++) {
        for (int gone = 0; gone < COUNT; gone += 3) {
            char name[80];
            snprintf(name, sizeof name, "backend %d %s", gone, kinds[mark]);
            current = name;
            check_only_its_keys_move(gone, mark);
        }
    }
}

static void test_addition(void)
{
    static const int old_order[COUNT] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    static const int new_order[COUNT + 1] = { 8, 0, 1, 2, 3, 4, 5, 6, 7 };
    struct backend *old_list[COUNT], *new_list[COUNT + 1];
    struct pool old = hash_pool(old_list, old_order, COUNT), grown = hash_pool(new_list, new_order, COUNT + 1);
    unsigned taken = 0;

    current = "a backend added";
    for (int n = 0; n < KEYS; n++) {
        struct backend *before = backend_pick_keyed(&old, 0, key_of(n));
        struct backend *after = backend_pick_keyed(&grown, 0, key_of(n));

        CHECK(after == before || after == &backends[COUNT], "key %d moved between old backends", n);
        taken += after == &backends[COUNT];
    }
    /* About 1/9 of the keys (2,222) go to the new one. */
    CHECK(taken > KEYS / 9 * 8 / 10 && taken < KEYS / 9 * 12 / 10, "the new backend took %u keys", taken);
}

static void test_all_down(void)
{
    static const int order[2] = { 0, 1 };
    struct backend *list[2];
    struct pool pool = hash_pool(list, order, 2);
    uint64_t key = key_of(7);
    struct backend *best = backend_pick_keyed(&pool, 0, key);

    current = "every backend down";
    /* Passive health only: the highest score among those down is tried. */
    for (int i = 0; i < 2; i++) {
        rows[i].down = true;
        rows[i].retry_at = 1e12;
    }
    CHECK(backend_pick_keyed(&pool, 0, key) == best, "not the key's own backend");
    CHECK(backend_pick_keyed(&pool, UINT64_C(3), key) == NULL, "both tried");
    for (int i = 0; i < 2; i++) {
        rows[i].down = false;
        rows[i].failing = true;
    }
    CHECK(backend_pick_keyed(&pool, 0, key) == NULL, "both failing their checks");
    for (int i = 0; i < 2; i++)
        rows[i].failing = false;
}

int main(void)
{
    make_backends();
    test_known_answers();
    test_deterministic_and_spread();
    test_removal();
    test_addition();
    test_all_down();
    printf("test_hash_pick: %s\n", failures == 0 ? "all checks passed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
