/* fastcgi_script.c -- what a request to a PHP site runs (see
 * fastcgi_script.h). */
#include "fastcgi_script.h"

#include <stdio.h>
#include <string.h>

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

/* The front controller, if root/index exists. */
static enum fastcgi_what front(int root_fd, const char *root, const struct fastcgi_settings *settings,
                               struct fastcgi_script *script)
{
    int status = regular_file(root_fd, settings->index);

    if (status == 404)
        return FASTCGI_NOT_FOUND;
    if (status != 200)
        return failed(status);
    return name_script(root, settings->index, script) ? FASTCGI_FRONT : FASTCGI_NOT_FOUND;
}

enum fastcgi_what fastcgi_script_find(int root_fd, const char *root, const char *target, size_t length,
                                      const struct fastcgi_settings *settings,
                                      struct fastcgi_script *script)
{
    char path[FILE_PATH_MAX];
    bool slash;
    struct file_found f;
    int status;

    if (file_path_decode(target, length, path, sizeof path - strlen(settings->index) - 1, &slash) != 0)
        return FASTCGI_NOT_FOUND;
    if (!slash && path[0] != '\0') {
        status = regular_file(root_fd, path);
        if (status == 200 && runs(path, settings))
            return name_script(root, path, script) ? FASTCGI_RUN : FASTCGI_NOT_FOUND;
        if (status == 200)
            return FASTCGI_FILE;
        if (status != 404)
            return failed(status);
    } else {
        /* A directory's index, if it has one. */
        size_t n = strlen(path);
        snprintf(path + n, sizeof path - n, "%s%s", n > 0 ? "/" : "", settings->index);
        status = regular_file(root_fd, path);
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
    return front(root_fd, root, settings, script);
}
