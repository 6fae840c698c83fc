/* fastcgi_script.h -- what a request to a site with `root` and `fastcgi`
 * runs: the rule of a PHP site, pure of the exchange (it looks at the
 * files beneath the root, nothing else).
 *
 * The path is decoded and checked as files' paths are (file_path.h: no
 * "..", no hidden names, nothing outside the root). Then:
 *
 *   an existing regular file with a listed extension    runs (RUN)
 *   an existing other regular file                      is served as a file (FILE)
 *   a directory named without its slash                 301, as files do (REDIRECT)
 *   a directory with its slash and its `index`          runs that index (RUN)
 *   a directory with its slash, no `index`, index.html  served as a file (FILE)
 *   anything else, if root/index exists                 the front controller (FRONT)
 *   anything else                                       404 (NOT_FOUND)
 *
 * A path is never split at ".php/": "/uploads/cat.jpg/x.php" names no
 * file, so it goes to the front controller, and cat.jpg never runs (the
 * PATH_INFO hole). SCRIPT_FILENAME is always a regular file beneath the
 * root with a listed extension, or root/index; PATH_INFO is always empty. */
#ifndef RSP_FASTCGI_SCRIPT_H
#define RSP_FASTCGI_SCRIPT_H

#include "fastcgi.h"
#include "file_path.h"
#include "pool.h"

#include <stdbool.h>
#include <stddef.h>

/* A site's `fastcgi` settings (config_fastcgi.c). */
struct fastcgi_settings {
    char *index;                /* "index.php" */
    char **extensions;          /* { ".php" } */
    size_t extension_count;
    char **params;              /* name, value, name, value, ...: extra PARAMS */
    size_t param_count;         /* pairs */
    bool keep_conn;             /* ask php-fpm to keep the connection, and pool it */
    struct fastcgi_seen *seen;  /* scripts found lately (fastcgi_script.c); NULL until the first */
};

enum fastcgi_what {
    FASTCGI_RUN,        /* run script (filename, name) */
    FASTCGI_FRONT,      /* run the front controller root/index */
    FASTCGI_FILE,       /* serve the path as a file (exchange_file.c) */
    FASTCGI_REDIRECT,   /* a directory without its slash: exchange_file.c's 301 */
    FASTCGI_NOT_FOUND,  /* 404 */
    FASTCGI_FORBIDDEN,  /* 403 (EACCES, EPERM) */
    FASTCGI_ERROR,      /* 500: the open failed otherwise */
};

/* The script that runs. */
struct fastcgi_script {
    char filename[2 * FILE_PATH_MAX]; /* SCRIPT_FILENAME: root, '/', the path */
    char name[FILE_PATH_MAX + 1];     /* SCRIPT_NAME: '/', the path */
};

/* Decides what the request target (length bytes, origin form) runs on a
 * site whose root is root (its path as configured) open as root_fd, at
 * time now (seconds); fills *script for RUN and FRONT. A script found
 * beneath the root is trusted for FASTCGI_SEEN_FOR seconds without
 * looking again (settings->seen): a removed one may be named to the
 * backend that long, which then answers 404 itself. */
enum fastcgi_what fastcgi_script_find(int root_fd, const char *root, const char *target, size_t length,
                                      struct fastcgi_settings *settings, double now,
                                      struct fastcgi_script *script);

/* How long a script found is trusted, in seconds. */
#define FASTCGI_SEEN_FOR 1.0

/* A site's FastCGI backends and settings (struct pool's fastcgi). */
struct fastcgi_pool {
    struct pool pool;                 /* its protocol &backend_fastcgi */
    struct fastcgi_settings settings;
};

/* Frees f's pool and settings, and f (config_fastcgi.c); NULL is fine. */
void fastcgi_pool_free(struct fastcgi_pool *f);

/* What a request to a FastCGI backend carries (relay_private.h's
 * x->fastcgi): its script and the reading of the response
 * (backend_fastcgi.c). */
struct fastcgi_request {
    struct fastcgi_script script;
    const char *root;                 /* DOCUMENT_ROOT */
    const struct fastcgi_settings *settings;
    struct fcgi_parser parser;
    bool keep;                        /* KEEP_CONN was asked */
    bool head_done;                   /* the CGI head was read */
};

#endif
