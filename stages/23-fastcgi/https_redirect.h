/* https_redirect.h -- what rsp answers by itself on its plain HTTP port
 * when it also serves HTTPS: ACME challenges from acme_webroot, and with
 * tls.redirect_http a redirect to the same URL over https (301, or 308
 * for a method other than GET and HEAD). */
#ifndef RSP_HTTPS_REDIRECT_H
#define RSP_HTTPS_REDIRECT_H

#include "buffer.h"
#include "config.h"
#include "request.h"

#include <stdbool.h>

/* For a request that came over plain HTTP: appends rsp's own answer to
 * out and returns 1, or returns 0 when the request goes on to be routed
 * as usual; -1 if out of memory. The ACME path is answered when there is
 * an acme_webroot, and is never redirected (the ACME server validates
 * over plain HTTP). A redirect needs the Host; without one it is a 400. */
int https_plain_answer(const struct config *c, const struct request_view *req,
                       const struct request_info *info, bool head_only, const char *connection,
                       struct buffer *out);

#endif
