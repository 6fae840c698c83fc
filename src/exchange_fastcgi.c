/* exchange_fastcgi.c -- a request to a site with `root` and `fastcgi`:
 * what runs (fastcgi_script.h) decides whether its files answer it
 * (exchange_file.c) or its FastCGI backends (backend_fastcgi.c). */
#include "exchange_private.h"

#include "fastcgi_script.h"
#include "log.h"
#include "reactor.h"

#include <stdlib.h>

bool exchange_fastcgi_route(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct pool *files = x->pool;
    struct request_view view = relay_request_view(relay);
    size_t length;
    const char *target = exchange_file_target(&view, &length);
    /* Not calloc: 12 KiB of names, filled where they are used, need no
     * zeroing first. */
    struct fastcgi_request *f = malloc(sizeof *f);

    if (f == NULL) {
        log_msg("out of memory choosing a script");
        exchange_fail_request(relay, 500);
        return false;
    }
    fcgi_parser_init(&f->parser);
    f->keep = f->head_done = false;
    enum fastcgi_what what = fastcgi_script_find(files->root_fd, files->root, target, length,
                                                 &files->fastcgi->settings, reactor_now(), &f->script);
    switch (what) {
    case FASTCGI_RUN:
    case FASTCGI_FRONT:
        f->root = files->root;
        f->settings = &files->fastcgi->settings;
        x->fastcgi = f;
        x->pool = &files->fastcgi->pool;
        return true;
    case FASTCGI_FILE:
    case FASTCGI_REDIRECT:
        free(f);
        return true;
    case FASTCGI_NOT_FOUND:
    case FASTCGI_FORBIDDEN:
    case FASTCGI_ERROR:
        break;
    }
    free(f);
    if (what == FASTCGI_ERROR)
        log_msg("choosing the script for %.*s failed", (int)length, target);
    exchange_fail_request(relay, what == FASTCGI_NOT_FOUND ? 404 : what == FASTCGI_FORBIDDEN ? 403 : 500);
    return false;
}
