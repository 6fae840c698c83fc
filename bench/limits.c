/* limits.c -- what limit_req costs per request (bench/limits): limit_take
 * on a warm table (one key, and a thousand keys that stay in the CPU's
 * caches), on a cold one (random keys over the whole 5 MiB table, the
 * entries out of cache), on new keys that each evict an old one, and two
 * processes taking from one hot key at once (the set's lock bouncing
 * between cores). Each figure includes the clock reading rsp makes per
 * request (limit_now). Prints a Markdown table; see bench/README.md. */
#include "limit.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEYS (LIMIT_SLOTS * 4)

static struct limit_key keys[KEYS];

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ns per limit_take over n calls on keys[order[i % span]]. */
static double run(const unsigned *order, size_t span, size_t n)
{
    volatile unsigned allowed = 0;
    double begin = now_s();

    for (size_t i = 0; i < n; i++)
        allowed += limit_take(&keys[order[i % span]], 1e6, 1000000, limit_now()).allowed;
    return (now_s() - begin) * 1e9 / (double)n;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* run() five times: the median (the machine may be busy with more). */
static double median(const unsigned *order, size_t span, size_t n)
{
    double ns[5];

    for (int i = 0; i < 5; i++)
        ns[i] = run(order, span, n);
    qsort(ns, 5, sizeof ns[0], by_value);
    return ns[2];
}

/* The same in two processes at once on one key; the slower one's ns. */
static double contended(size_t n)
{
    unsigned zero = 0;
    int pipefd[2];
    double worst = 0;

    if (pipe(pipefd) == -1)
        return -1;
    for (int p = 0; p < 2; p++) {
        pid_t pid = fork();
        if (pid == -1)
            return -1;
        if (pid == 0) {
            double ns = run(&zero, 1, n);
            ssize_t w = write(pipefd[1], &ns, sizeof ns);
            _exit(w == (ssize_t)sizeof ns ? 0 : 1);
        }
    }
    for (int p = 0; p < 2; p++) {
        double ns;
        if (read(pipefd[0], &ns, sizeof ns) == (ssize_t)sizeof ns && ns > worst)
            worst = ns;
        wait(NULL);
    }
    close(pipefd[0]);
    close(pipefd[1]);
    return worst;
}

int main(void)
{
    static unsigned order[KEYS];
    size_t n = 5000000;

    if (stats_init() == -1 || limit_init() == -1)
        return 1;
    for (unsigned i = 0; i < KEYS; i++) {
        char text[32];
        snprintf(text, sizeof text, "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
        limit_key_of(text, 1, &keys[i]);
        order[i] = i;
    }
    srand(1);
    for (unsigned i = KEYS - 1; i > 0; i--) { /* a random order: no prefetcher helps */
        unsigned j = (unsigned)rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    double clock_ns = now_s();
    for (size_t i = 0; i < n; i++)
        (void)limit_now();
    clock_ns = (now_s() - clock_ns) * 1e9 / (double)n;

    unsigned zero = 0, small[1000];
    for (unsigned i = 0; i < 1000; i++)
        small[i] = i;
    run(small, 1000, n / 10); /* the pages touched once, the caches warm */
    double one = median(&zero, 1, n);
    double thousand = median(small, 1000, n);
    /* 4 x the table's keys in turn: each was evicted since its last turn. */
    double evicting = median(order, KEYS, KEYS);
    /* The last LIMIT_SLOTS keys taken: nearly all in the table now. */
    const unsigned *fill = order + KEYS - LIMIT_SLOTS;
    size_t filled = LIMIT_SLOTS;
    double cold = median(fill, filled, n);
    double two = contended(n);

    printf("Medians of five runs.\n\n");
    printf("| case | ns per limit_take |\n|---|---|\n");
    printf("| the clock alone (limit_now, CLOCK_MONOTONIC by the vDSO) | %.1f |\n", clock_ns);
    printf("| warm: one key, again and again | %.1f |\n", one);
    printf("| warm: 1,000 keys in turn (in the CPU's caches) | %.1f |\n", thousand);
    printf("| cold: the %zu keys last taken, in the full table, in random order | %.1f |\n", filled, cold);
    printf("| new keys, each evicting the least recent of its set | %.1f |\n", evicting);
    printf("| two processes on one key at once (the slower) | %.1f |\n", two);
    printf("\nMemory: %zu bytes a tracked address at one level (the table's bytes by its entries: "
           "%zu of entry, %zu of key, the rest the sets' locks and alignment), %d entries, "
           "%zu bytes of table (%.1f MiB), mapped once for every process.\n",
           sizeof(struct limit_table) / LIMIT_SLOTS, sizeof(struct limit_entry), sizeof(struct limit_key),
           LIMIT_SLOTS, sizeof(struct limit_table), sizeof(struct limit_table) / 1048576.0);
    limit_close();
    stats_close();
    return 0;
}
