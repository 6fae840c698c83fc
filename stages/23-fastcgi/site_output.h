/* site_output.h -- what rsp does to the responses it sends for a site
 * (chapter 21): compress them, set or remove headers, replace error
 * responses with pages of the operator's. The settings `compress`,
 * `headers` and `error_pages` come at three levels, the top level, a named
 * pool and a site; config_files.c reads them and resolves the inheritance
 * once, at load, so a request only picks the struct that applies to it
 * (site_output_for). */
#ifndef RSP_SITE_OUTPUT_H
#define RSP_SITE_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct pool;
struct site;

/* compress = true | false | { types = {...}, min_length = 256 } */
struct compress_settings {
    bool on;
    char **types;               /* media types, lower case ("text/html"); a subtype
                                   may be an asterisk, alone or before "+json":
                                   the defaults with true */
    size_t type_count;
    size_t min_length;          /* a Content-Length below this is sent as it is */
};

/* headers = { NAME = "value" | false }: one header set or removed. */
struct header_edit {
    char *name;                 /* a token, as the config spells it */
    char *value;                /* NULL: remove the header */
};

/* error_pages = { [404] = "/srv/www/404.html", ... }: one page, read at load. */
struct error_page {
    int status;                 /* 400..599 */
    char *path;                 /* absolute, as configured */
    char *body;                 /* the file's bytes (not NUL-terminated) */
    size_t length;              /* at most ERROR_PAGE_MAX */
    const char *content_type;   /* NULL: the caller asks mime for path's type */
};

/* An error page file holds at most this many bytes. */
#define ERROR_PAGE_MAX (1024 * 1024)

/* limit_req = { rate = R, burst = B } (chapter 22): a token bucket per
 * client address (limit.h), of the level that set it. */
struct limit_req_settings {
    double rate;                /* tokens a second; 0: no limit */
    unsigned burst;             /* the bucket's size */
    uint32_t level;             /* the id of the level that set it (limit_level): levels
                                   that inherit it share its budget */
};

/* Everything above, resolved for one level. Sorted: headers by name (case
 * ignored), error pages by status. Each struct owns all it points to. */
struct site_output {
    struct compress_settings compress;
    struct header_edit *headers;
    size_t header_count;
    struct error_page *error_pages;
    size_t error_page_count;
    bool error_pages_backends;  /* a backend's own response with a listed status is replaced too */
    struct limit_req_settings limit_req;
};

/* What applies to a request: that of site (the one its Host names) if
 * not NULL, else that of pool (the one serving it, which route() may have
 * chosen) if not NULL, else config's top level. */
const struct site_output *site_output_for(const struct config *config, const struct site *site,
                                          const struct pool *pool);

/* The page for status in o, or NULL if it has none. */
const struct error_page *site_output_error_page(const struct site_output *o, int status);

/* Frees what o holds and empties it. */
void site_output_free(struct site_output *o);

#endif
