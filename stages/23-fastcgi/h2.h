/* h2.h -- one HTTP/2 server session over a client connection.
 *
 * libnghttp2 does the framing, HPACK and the stream states; it does no I/O
 * of its own. The owner reads the client connection (already TLS, ALPN
 * said "h2") and hands the bytes to h2_session_receive; the frames the
 * session has to send go into the connection's write queue on
 * h2_session_flush, and stop going there while that queue is above
 * H2_HIGH_WATER: the client that does not read stops being written to,
 * and then, through the flow-control windows, stops being sent to.
 *
 * A stream is one request. The session checks its head (RFC 9113, 8.1 to
 * 8.3, with nghttp2's own checks in front: h2_validate.c says which are
 * whose) and tells the owner only of requests that passed: a malformed
 * one is a stream error (RST_STREAM PROTOCOL_ERROR) nobody behind rsp
 * ever sees. Flow control is backpressure: no WINDOW_UPDATE goes out for
 * request body bytes until the owner says it passed them on
 * (h2_consume), and a response body waits in a bounded buffer per stream
 * (h2_write_body, h2_stream_queued, on_drained). Floods (rapid reset,
 * "MadeYouReset", SETTINGS, PING, PRIORITY, empty DATA, CONTINUATION)
 * end the connection with GOAWAY ENHANCE_YOUR_CALM; the numbers are
 * below.
 *
 * Callbacks run inside h2_session_receive, h2_session_flush and (on_goaway)
 * h2_goaway. They may call every function here except h2_session_free. */
#ifndef RSP_H2_H
#define RSP_H2_H

#include "connection.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The connection's queue above which no more frames are taken from the
 * session (RELAY_HIGH_WATER of HTTP/1). */
#define H2_HIGH_WATER (64 * 1024)

/* Flood budgets: each kind of frame that makes the server work without
 * making progress spends a token; a bucket holds BURST tokens and gets
 * RATE back each second. An empty bucket ends the connection (GOAWAY
 * ENHANCE_YOUR_CALM). */
/* Resets: RST_STREAM from the client (rapid reset, CVE-2023-44487) and
 * RST_STREAM the server sends because of the client ("MadeYouReset",
 * CVE-2025-8671: a bad header, DATA beyond content-length, a window
 * overflow, a stream over the limit), and requests answered by the
 * session itself (431, 405). A browser leaving a page cancels at most one
 * burst of max_concurrent_streams (128) at once. */
#define H2_RESET_BURST 200
#define H2_RESET_RATE 33
/* SETTINGS without ACK: clients send one, rarely a few. */
#define H2_SETTINGS_BURST 32
#define H2_SETTINGS_RATE 4
/* PING without ACK (CVE-2019-9512): keep-alives and RTT probes. */
#define H2_PING_BURST 50
#define H2_PING_RATE 10
/* PRIORITY (CVE-2019-9513): RFC 7540 clients sent about one per stream;
 * rsp announces SETTINGS_NO_RFC7540_PRIORITIES, nghttp2 keeps no tree. */
#define H2_PRIORITY_BURST 200
#define H2_PRIORITY_RATE 50
/* DATA frames with no data and no END_STREAM (CVE-2019-9518): never
 * needed. */
#define H2_EMPTY_DATA_BURST 50
#define H2_EMPTY_DATA_RATE 10
/* CONTINUATION frames after one HEADERS (CVE-2024-27316, -28182):
 * nghttp2's limit; a header list within max_header_list_size fits in 3
 * frames of 16 KiB, a client that needs more than 8 is misbehaving. */
#define H2_MAX_CONTINUATIONS 8
/* SETTINGS and PING ACKs queued for a client that does not read
 * (nghttp2_option_set_max_outbound_ack; its own default is 1000). */
#define H2_MAX_OUTBOUND_ACK 100
/* Entries in one SETTINGS frame (nghttp2's default; 7 are defined). */
#define H2_MAX_SETTINGS_ENTRIES 32
/* HPACK dynamic tables, both ways (SETTINGS_HEADER_TABLE_SIZE). */
#define H2_HEADER_TABLE_SIZE 4096

/* What the session advertises and enforces; h2_settings_default fills in
 * the defaults given after each field. */
struct h2_settings {
    uint32_t max_concurrent_streams; /* 128; more are refused (REFUSED_STREAM) */
    uint32_t max_header_list_size;   /* 35968: rsp's default max_request_head
                                        (32 KiB) plus the 32 bytes RFC 9113
                                        counts per field, for 100 fields; a
                                        larger request is answered 431 */
    uint32_t max_header_fields;      /* 100 (HTTP_MAX_HEADERS): regular fields,
                                        cookie crumbs counted as one; more: 431 */
    uint32_t stream_window;          /* 65535: request body bytes a stream may
                                        have unconsumed (SETTINGS_INITIAL_WINDOW_SIZE) */
    uint32_t connection_window;      /* 1 MiB: the same for all streams together */
    size_t stream_low_water;         /* 16 KiB: on_drained once a stream's
                                        response buffer is down to this */
};

/* A piece of text, not NUL-terminated. */
struct h2_str {
    const char *data;
    size_t length;
};

struct h2_header {
    struct h2_str name;   /* lower case */
    struct h2_str value;
};

/* A request head as the owner gets it; valid during on_request only. */
struct h2_request_head {
    struct h2_str method;
    struct h2_str scheme;
    struct h2_str authority;        /* :authority, or the Host field without it;
                                       never empty (nghttp2 requires one) */
    struct h2_str path;             /* starts with '/', or is "*" (OPTIONS) */
    const struct h2_header *headers; /* the regular fields, in order, without
                                       host, content-length and te; the cookie
                                       crumbs joined into one cookie field, last */
    size_t header_count;
    bool has_content_length;
    uint64_t content_length;
    bool end_stream;                /* no body follows: no on_data for this stream */
};

struct h2_callbacks {
    /* A new stream's head is complete and valid. The owner answers with
     * h2_respond (then h2_write_body, h2_end_body) or h2_reset_stream. */
    void (*on_request)(void *closure, int32_t stream_id, const struct h2_request_head *head);
    /* Request body bytes, or with end true (data NULL, len 0) its end. The
     * owner calls h2_consume once it has passed bytes on. */
    void (*on_data)(void *closure, int32_t stream_id, const char *data, size_t len, bool end);
    /* A stream the owner was told of is gone: error_code 0 (NO_ERROR) when
     * both sides ended, else the RST_STREAM code (either side's). The owner
     * forgets the stream; its id may not be used again. */
    void (*on_stream_closed)(void *closure, int32_t stream_id, uint32_t error_code);
    /* The stream's response buffer went down to stream_low_water. */
    void (*on_drained)(void *closure, int32_t stream_id);
    /* A GOAWAY: sent by the session (from_client false; reason says why,
     * for the error log), or received. Also called once when the session
     * dies without one (a fatal error: the owner closes). */
    void (*on_goaway)(void *closure, bool from_client, uint32_t error_code, const char *reason);
    /* Optional (may be NULL), for the log: a stream the owner was never
     * told of was refused: status 0 for RST_STREAM, else the answer the
     * session gave itself (405 CONNECT, 431 head too large). */
    void (*on_rejected)(void *closure, int32_t stream_id, int status, const char *reason);
};

struct h2_session;

/* Fills s with the defaults. */
void h2_settings_default(struct h2_settings *s);

/* Starts a server session on c and queues its SETTINGS (written by the
 * first h2_session_flush). s and cb are copied. Returns NULL if out of
 * memory. */
struct h2_session *h2_session_new(struct connection *c, const struct h2_settings *s,
                                  const struct h2_callbacks *cb, void *closure);

/* Frees the session and its streams, calling no callback: the owner ends
 * what it holds for the streams itself. Leaves the connection alone. */
void h2_session_free(struct h2_session *sess);

/* Processes len bytes read from the client, calling the callbacks, then
 * flushes. Returns 0, or -1 when the session is over at once (a fatal
 * error, reported through on_goaway): the owner closes the connection. */
int h2_session_receive(struct h2_session *sess, const char *data, size_t len);

/* Writes the frames the session has ready into the connection, until its
 * queue is above H2_HIGH_WATER. Call after any call that may produce
 * frames, and when the connection's queue has drained. Returns 0, or -1
 * on a fatal error (as h2_session_receive). */
int h2_session_flush(struct h2_session *sess);

/* True while the session wants the client's bytes: the owner stops reading
 * otherwise (also while the connection's queue is above H2_HIGH_WATER:
 * a client that does not read our frames is not read either). */
bool h2_session_want_read(const struct h2_session *sess);

/* True once nothing is left to read or write (after a GOAWAY, with every
 * stream finished, or after a fatal error): the owner closes the
 * connection once its queue is empty. */
bool h2_session_done(const struct h2_session *sess);

/* Answers a stream: status 100 to 599 except 101 (1xx are interim: a
 * final one must follow), then the headers, names lowercased, without
 * the HTTP/1-only connection, keep-alive, proxy-connection,
 * transfer-encoding and upgrade. has_body false ends the stream with the
 * head (HEAD, 204, 304, or an empty body). Returns 0, or -1 (no such
 * stream, answered already, out of memory). */
int h2_respond(struct h2_session *sess, int32_t stream_id, int status,
               const struct h2_header *headers, size_t count, bool has_body);

/* Appends response body bytes to the stream's buffer; they leave as the
 * windows allow. The buffer is not bounded here: the owner stops reading
 * its backend once h2_stream_queued is above its high-water mark, and
 * starts again on on_drained. Returns 0, or -1 (no such stream, no body
 * announced, ended, out of memory). */
int h2_write_body(struct h2_session *sess, int32_t stream_id, const char *data, size_t len);

/* The response body is complete: END_STREAM after what is buffered.
 * Returns 0, or -1. */
int h2_end_body(struct h2_session *sess, int32_t stream_id);

/* Response body bytes of the stream not yet taken by the framing; 0 for
 * no such stream. */
size_t h2_stream_queued(const struct h2_session *sess, int32_t stream_id);

/* The owner passed on n request body bytes of the stream: the client may
 * send as many more (WINDOW_UPDATE, once enough are consumed). */
void h2_consume(struct h2_session *sess, int32_t stream_id, size_t n);

/* Resets a stream (RST_STREAM with code, e.g. NGHTTP2_INTERNAL_ERROR when
 * the backend failed mid-response, NGHTTP2_CANCEL). on_stream_closed
 * follows when it is sent. Not counted as the client's fault. */
void h2_reset_stream(struct h2_session *sess, int32_t stream_id, uint32_t code);

/* Shuts the session down. Graceful (SIGHUP, SIGTERM): a GOAWAY telling
 * the client to open no more streams, a PING, and once its ACK came
 * back the final GOAWAY with the last stream processed; streams in
 * flight finish. Otherwise (also after a graceful one whose time is up)
 * GOAWAY NO_ERROR and the end once it is sent: the owner ends its
 * streams' exchanges itself. Reported through on_goaway. */
void h2_goaway(struct h2_session *sess, bool graceful);

/* Streams the owner has been told of and not yet told are closed. */
size_t h2_session_streams(const struct h2_session *sess);

/* Bytes the session holds: nghttp2's allocations, the heads being read,
 * the response buffers. */
size_t h2_session_memory(const struct h2_session *sess);

/* Since when (reactor_now seconds) response bytes have waited without
 * any leaving, for the stream that has waited longest (*stream_id, if
 * not NULL), e.g. behind a window the client keeps at zero; 0 when no
 * stream waits. The owner's send timeout applies to it. */
double h2_session_stalled_since(const struct h2_session *sess, int32_t *stream_id);

/* h2_validate.c: the rules of a request head (RFC 9113, 8.2 and 8.3,
 * RFC 9110, 5.5). */

/* The decision on a field of a request's header section: */
enum h2_field_verdict {
    H2_FIELD_OK,          /* a valid field */
    H2_FIELD_MALFORMED,   /* a stream error */
};

/* Checks one field as it arrives (pseudo-header fields too). */
enum h2_field_verdict h2_field_check(const char *name, size_t name_length,
                                     const char *value, size_t value_length);

/* Checks a whole request header section (fields in the order received)
 * and fills *head (its headers member excepted), pointing into fields.
 * Returns NULL, or why the request is malformed. *connect is set when the
 * method is CONNECT (well-formed or not), which rsp refuses with 405. */
const char *h2_request_check(const struct h2_header *fields, size_t count,
                             struct h2_request_head *head, bool *connect);

/* True if a regular field of this name is not passed on: host (it is
 * the authority), content-length (the owner frames the body), te. */
bool h2_field_is_taken_out(struct h2_str name);

/* True if a response header of this name (any case) is not sent over
 * HTTP/2 (RFC 9113, 8.2.2). */
bool h2_response_header_dropped(struct h2_str name);

#endif
