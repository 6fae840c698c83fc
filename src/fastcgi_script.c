/* fastcgi_script.c -- what a request to a PHP site runs (see
 * fastcgi_script.h). */
#include "fastcgi_script.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scripts found lately. Making sure that a script is a regular file
 * beneath the root takes three system calls (openat2, fstat, close),
 * about as many as the rest of a small PHP request costs the proxy; a
 * site's scripts are few and asked for again and again, so one found is
 * trusted for FASTCGI_SEEN_FOR seconds. Only scripts found are kept: a
 * new file runs at once. One slot per hash of (root_fd, path), a
 * collision replaces; a path longer than SEEN_PATH is looked up each
 * time. */
#define SEEN_SLOTS 64
#define SEEN_PATH 200

struct fastcgi_seen {
    struct seen_slot {
        bool used;
        int root_fd;
        double at;              /* when it was found */
        char path[SEEN_PATH];   /* relative to the root */
    } slot[SEEN_SLOTS];
};

/* True if path ends with one of the listed extensions (case counts, as
 * it does for the file system). */
static bool runs(const char *path, const struct fastcgi_settings *settings)
{
    size_t n = strlen(path);

    for (size_t i = 0; i < settings->extension_count; i++) {
        size_t e = strlen(settings->extensions[i]);
        if (n > e && strcmp(path + n - e, settings->extensions[i]) == 0)
            return true;
    }
    return false;
}

/* Fills *script for the path (relative to root). Returns false if the
 * names would not fit. */
static bool name_script(const char *root, const char *path, struct fastcgi_script *script)
{
    size_t r = strlen(root);

    while (r > 1 && root[r - 1] == '/')
        r--;
    int a = snprintf(script->filename, sizeof script->filename, "%.*s/%s", (int)r, root, path);
    int b = snprintf(script->name, sizeof script->name, "/%s", path);
    return a > 0 && (size_t)a < sizeof script->filename && b > 0 && (size_t)b < sizeof script->name;
}

/* What a status of file_open/file_open_variant other than 200 and 404 means. */
static enum fastcgi_what failed(int status)
{
    return status == 403 ? FASTCGI_FORBIDDEN : FASTCGI_ERROR;
}

/* Whether the relative path is a regular file beneath root: 200, 404
 * (missing, not a regular file, refused), 403 or 500. */
static int regular_file(int root_fd, const char *path)
{
    struct file_found f;
    int status = file_open_variant(root_fd, path, "", &f);

    file_found_release(&f);
    return status;
}

/* The slot that (root_fd, path) hashes to (FNV-1a). */
static struct seen_slot *seen_slot(struct fastcgi_seen *seen, int root_fd, const char *path)
{
    uint32_t h = 2166136261u ^ (uint32_t)root_fd;

    for (const unsigned char *p = (const unsigned char *)path; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return &seen->slot[h % SEEN_SLOTS];
}

/* regular_file for a script: 200 without looking if it was found less
 * than FASTCGI_SEEN_FOR seconds before now. */
static int script_file(int root_fd, const char *path, struct fastcgi_settings *settings, double now)
{
    size_t n = strlen(path);

    if (n >= SEEN_PATH)
        return regular_file(root_fd, path);
    if (settings->seen == NULL && (settings->seen = calloc(1, sizeof *settings->seen)) == NULL)
        return regular_file(root_fd, path); /* no memory for it: look each time */

    struct seen_slot *slot = seen_slot(settings->seen, root_fd, path);
    bool same = slot->used && slot->root_fd == root_fd && strcmp(slot->path, path) == 0;

    if (same && now >= slot->at && now - slot->at < FASTCGI_SEEN_FOR)
        return 200;
    int status = regular_file(root_fd, path);
    if (status == 200) {
        *slot = (struct seen_slot){ .used = true, .root_fd = root_fd, .at = now };
        memcpy(slot->path, path, n + 1);
    } else if (same) {
        slot->used = false;
    }
    return status;
}

/* The front controller, if root/index exists. */
static enum fastcgi_what front(int root_fd, const char *root, struct fastcgi_settings *settings, double now,
                               struct fastcgi_script *script)
{
    int status = script_file(root_fd, settings->index, settings, now);

    if (status == 404)
        return FASTCGI_NOT_FOUND;
    if (status != 200)
        return failed(status);
    return name_script(root, settings->index, script) ? FASTCGI_FRONT : FASTCGI_NOT_FOUND;
}

enum fastcgi_what fastcgi_script_find(int root_fd, const char *root, const char *target, size_t length,
                                      struct fastcgi_settings *settings, double now,
                                      struct fastcgi_script *script)
{
    char path[FILE_PATH_MAX];
    bool slash;
    struct file_found f;
    int status;

    if (file_path_decode(target, length, path, sizeof path - strlen(settings->index) - 1, &slash) != 0)
        return FASTCGI_NOT_FOUND;
    if (!slash && path[0] != '\0') {
        bool runnable = runs(path, settings);
        status = runnable ? script_file(root_fd, path, settings, now) : regular_file(root_fd, path);
        if (status == 200 && runnable)
            return name_script(root, path, script) ? FASTCGI_RUN : FASTCGI_NOT_FOUND;
        if (status == 200)
            return FASTCGI_FILE;
        if (status != 404)
            return failed(status);
    } else {
        /* A directory's index, if it has one. */
        size_t n = strlen(path);
        snprintf(path + n, sizeof path - n, "%s%s", n > 0 ? "/" : "", settings->index);
        status = script_file(root_fd, path, settings, now);
        if (status == 200)
            return name_script(root, path, script) ? FASTCGI_RUN : FASTCGI_NOT_FOUND;
        if (status != 404)
            return failed(status);
        path[n] = '\0';
    }
    /* A directory? file_open says so: 301 without the slash, 200 for
     * its index.html. */
    status = file_open(root_fd, target, length, &f);
    file_found_release(&f);
    if (status == 301)
        return FASTCGI_REDIRECT;
    if (status == 200 && slash)
        return FASTCGI_FILE;
    return front(root_fd, root, settings, now, script);
}
