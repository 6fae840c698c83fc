/* response_output.h -- what a site's output settings (site_output.h:
 * `compress`, `headers`, `error_pages`) do to the responses rsp sends
 * (chapter 21). Every final head passes body_filter_head, whoever made it
 * (a backend, rsp's own answer, a file): there the compression filter is
 * attached when it applies, and after the filters the header edits are
 * made, so they hold for every response but 1xx ones (and never for the
 * status listener, which has no exchange). Error pages replace the body
 * of rsp's own error answers (exchange_answer_ourselves) and, with
 * `backends = true`, of a backend's (start_response), status kept. */
#ifndef RSP_RESPONSE_OUTPUT_H
#define RSP_RESPONSE_OUTPUT_H

#include "response_head.h"
#include "site_output.h"

#include <stdbool.h>

struct relay;

/* The output settings that apply to the exchange's request: those of the
 * site its Host names, else of the pool serving it, else the top level's. */
const struct site_output *response_output(const struct relay *relay);

/* Before the filters see the final head: attaches the compression filter
 * if the response is to be compressed. Returns 0, or -1 if out of memory. */
int response_output_filters(struct relay *relay, const struct response_head *head);

/* After the filters: sets and removes the configured headers. Returns 0,
 * or -1 if out of memory. */
int response_output_headers(const struct relay *relay, struct response_head *head);

/* The error page for an answer with this status, or NULL if none. */
const struct error_page *response_output_page(const struct relay *relay, int status);

/* The Content-Type of an error page: its own if set, else by its path's
 * extension from mime's built-in types (a table loaded once per process,
 * from no file: error pages are the operator's HTML or text, which the
 * built-ins cover). */
const char *error_page_content_type(const struct error_page *page);

/* Makes head (status kept) carry page: its Content-Type and
 * Content-Length, and the page as the body (none for a HEAD request).
 * Returns 0, or -1 if out of memory. */
int response_output_page_head(struct response_head *head, const struct error_page *page, bool head_only);

#endif
