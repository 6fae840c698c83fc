/* buffering.h -- a slow client costs the backend nothing (chapter 17).
 *
 * A request body is read whole before a backend is chosen: in memory up
 * to request_buffer_size, the rest in an unlinked temporary file; only
 * then does the backend connection open, and the body goes to it as fast
 * as the backend takes it. A response is read as fast as the backend
 * sends it: up to response_buffer_size waits in the client's queue in
 * memory, the rest in a temporary file (up to max_temp_file_size), so
 * that the backend connection goes back to its pool as soon as the
 * backend is done, however slowly the client reads. Private to relay.c,
 * the exchange's files and relay_time.c, like relay_private.h. */
#ifndef RSP_BUFFERING_H
#define RSP_BUFFERING_H

#include "relay_private.h"

#include <stdbool.h>
#include <stdint.h>

/* The head of a request with a body is checked and routed: refuses a
 * body announced larger than max_body_size (413, before reading any of
 * it); else, with request_buffering, starts reading the body
 * (PHASE_BUFFER), answering 100 Continue if the client waits for it, and
 * connects once it is all in; without, connects at once (the body is
 * streamed, chapter 04). */
void buffering_begin(struct relay *relay);

/* Bytes from the client while its body is being buffered. */
void buffering_client_data(struct relay *relay, const char *data, size_t len);

/* The head was written to a backend connection: sends it the buffered
 * body, if any, from the start (again, on a retry). */
void buffering_send_body(struct relay *relay);

/* The response is over while bytes of a buffered body are not yet queued
 * for the backend (it answered early): returns true, and the rest of the
 * body will go out before the backend connection is closed (as
 * upstream_finish does, never reused); false if nothing is left. */
bool buffering_finish_after_body(struct relay *relay);

/* True if the exchange must not end yet: bytes of its response wait in
 * rsp for the client, or the rest of its body for the backend. */
bool buffering_busy(const struct relay *relay);

/* When a body buffered too slowly (under body_min_rate on average, after
 * the grace period) is to be refused with 408; HUGE_VAL if never. */
double buffering_rate_deadline(const struct relay *relay);

/* The final response head is parsed: decides whether the response may
 * wait on rsp's side for a slow client (not a stream: text/event-stream,
 * X-Accel-Buffering: no, an upgrade; nor with response_buffering off). */
void buffering_response_start(struct relay *relay, bool upgrading);

/* Bytes of the response body for the client: to its queue, or after
 * what waits in the temporary file. */
void buffering_to_client(struct relay *relay, const char *data, size_t len);

/* True if the backend must stop being read: the client is behind and the
 * response cannot wait for it in rsp (backpressure as in chapter 04). */
bool buffering_client_full(const struct relay *relay);

/* True if the backend may be read again. */
bool buffering_client_ready(const struct relay *relay);

/* True if bytes of the response still wait in rsp for the client, outside
 * its queue: the response is not over for the client yet. */
bool buffering_response_pending(const struct relay *relay);

/* True if the response may be spliced now: nothing of it waits in rsp
 * (splicing would overtake it) and the client keeps up. */
bool buffering_may_splice(const struct relay *relay);

/* After every event: feeds the backend the buffered body, and the client
 * what waits for it on disk, as each side drains. */
void buffering_settle(struct relay *relay);

/* Frees the exchange's buffers and closes its temporary files. */
void buffering_free(struct relay *relay);

#endif
