/* config_text.c -- a config file's bytes: read once, and handed as they
 * are from the master to its workers.
 *
 * With workers, a reload is read twice if each process reads the file: by
 * the master, which checks it, and then by every worker. An editor that
 * saves in two steps, or an operator who edits again a second later, and
 * the workers load something else than what the master checked (or a
 * file cut in half). So the master reads the file once, loads those bytes,
 * and puts them in shared memory for the workers, which load the same
 * bytes: one text, one generation, everywhere.
 *
 * The shared copy is guarded by a sequence number (a seqlock): odd while
 * the master writes, one more when it is done. A worker copies the text
 * and reads the number again; if it moved, the master wrote meanwhile and
 * the worker copies again (the master's next SIGHUP is on its way). */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The largest config a master hands to its workers. The mapping costs
 * only the pages a config uses. */
#define CONFIG_SHARE_MAX (4 * 1024 * 1024)

struct shared_text {
    _Atomic uint64_t sequence;  /* odd: being written */
    _Atomic size_t length;
    char text[];
};

static struct shared_text *shared;

/* Prints "rsp: PATH: MESSAGE" as config.c's errors do. */
static void text_error(const char *path, const char *what)
{
    fprintf(stderr, "rsp: %s: %s\n", path, what);
}

int config_read_file(const char *path, char **text, size_t *length)
{
    FILE *file = fopen(path, "r");
    char *buffer = NULL, message[512];
    size_t used = 0, size = 0;

    if (file == NULL) {
        snprintf(message, sizeof message, "cannot open config file: %s", strerror(errno));
        text_error(path, message);
        return -1;
    }
    for (;;) {
        size_t n;

        if (size - used < 4096) {
            char *bigger = size < (SIZE_MAX - 4096) / 2 ? realloc(buffer, size * 2 + 4096) : NULL;

            if (bigger == NULL) {
                text_error(path, "out of memory reading the config file");
                goto fail;
            }
            buffer = bigger;
            size = size * 2 + 4096;
        }
        n = fread(buffer + used, 1, size - used - 1, file);
        used += n;
        if (n == 0)
            break;
    }
    if (ferror(file)) {
        snprintf(message, sizeof message, "cannot read config file: %s", strerror(errno));
        text_error(path, message);
        goto fail;
    }
    if (fclose(file) != 0)
        log_errno("close %s", path);
    buffer[used] = '\0';
    *text = buffer;
    *length = used;
    return 0;

fail:
    free(buffer);
    if (fclose(file) != 0)
        log_errno("close %s", path);
    return -1;
}

int config_share_init(void)
{
    void *p = mmap(NULL, sizeof *shared + CONFIG_SHARE_MAX, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        log_errno("mmap (the config shared with the workers)");
        return -1;
    }
    shared = p;
    return 0;
}

int config_share_put(const char *path, const char *text, size_t length)
{
    uint64_t sequence = atomic_load_explicit(&shared->sequence, memory_order_relaxed);

    if (length > CONFIG_SHARE_MAX) {
        log_msg("%s is %zu bytes: more than the %d a master hands to its workers", path, length,
                CONFIG_SHARE_MAX);
        return -1;
    }
    atomic_store_explicit(&shared->sequence, sequence + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(shared->text, text, length);
    atomic_store_explicit(&shared->length, length, memory_order_relaxed);
    atomic_store_explicit(&shared->sequence, sequence + 2, memory_order_release);
    return 0;
}

int config_share_take(char **text, size_t *length)
{
    /* The master writes in microseconds; one that died in the middle must
     * not make its workers spin for ever. */
    for (int tries = 0; tries < 100000; tries++) {
        uint64_t before = atomic_load_explicit(&shared->sequence, memory_order_acquire);
        size_t n = atomic_load_explicit(&shared->length, memory_order_relaxed);
        char *copy;

        if (before % 2 == 1 || n > CONFIG_SHARE_MAX)
            continue; /* being written: a moment */
        copy = malloc(n + 1);
        if (copy == NULL) {
            log_msg("out of memory taking the config from the master");
            return -1;
        }
        memcpy(copy, shared->text, n);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&shared->sequence, memory_order_relaxed) != before) {
            free(copy);
            continue;
        }
        copy[n] = '\0';
        *text = copy;
        *length = n;
        return 0;
    }
    log_msg("the config the master shares is being written for too long");
    return -1;
}

void config_share_close(void)
{
    if (shared != NULL && munmap(shared, sizeof *shared + CONFIG_SHARE_MAX) == -1)
        log_errno("munmap");
    shared = NULL;
}
