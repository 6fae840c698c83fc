/* fastcgi.h -- the FastCGI record layer (FastCGI 1.0, 1996), as a web
 * server speaks it to a responder such as php-fpm. Pure: bytes in, bytes
 * out, no I/O.
 *
 * Every record is an 8-byte header (version 1, type, request id, content
 * length, padding length, a reserved byte), its content (at most 65535
 * bytes) and padding (rsp pads content to a multiple of 8):
 *
 *     | 1 | type | id hi | id lo | len hi | len lo | pad | 0 | content | pad |
 *
 * rsp sends BEGIN_REQUEST, then PARAMS (name-value pairs, each length in
 * one byte below 128 or four bytes with the top bit set) ended by an
 * empty PARAMS record, then STDIN ended by an empty STDIN record. The
 * responder answers with STDOUT and STDERR records and one END_REQUEST.
 * rsp carries one request at a time on a connection: its request id is
 * always 1. */
#ifndef RSP_FASTCGI_H
#define RSP_FASTCGI_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FCGI_VERSION_1 1
#define FCGI_HEADER_LEN 8
#define FCGI_MAX_CONTENT 65535
#define FCGI_REQUEST_ID 1    /* the only one rsp uses and accepts */

enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
    FCGI_DATA = 8,
    FCGI_GET_VALUES = 9,
    FCGI_GET_VALUES_RESULT = 10,
    FCGI_UNKNOWN_TYPE = 11,
};

#define FCGI_RESPONDER 1     /* BEGIN_REQUEST's role */
#define FCGI_KEEP_CONN 1     /* BEGIN_REQUEST's flag: keep the connection after END_REQUEST */

/* END_REQUEST's protocolStatus. */
enum fcgi_protocol_status {
    FCGI_REQUEST_COMPLETE = 0,
    FCGI_CANT_MPX_CONN = 1,
    FCGI_OVERLOADED = 2,
    FCGI_UNKNOWN_ROLE = 3,
};

/* Appends a record header of type with content_length bytes of content
 * and padding bytes of padding. Returns 0, or -1 if out of memory. */
int fcgi_append_header(struct buffer *out, enum fcgi_type type, size_t content_length, size_t padding);

/* Appends BEGIN_REQUEST (role RESPONDER; KEEP_CONN if keep). Returns 0
 * or -1 (out of memory). */
int fcgi_append_begin(struct buffer *out, bool keep);

/* Appends one name-value pair (the content of PARAMS records) to out.
 * Returns 0, or -1 if out of memory or a length exceeds 2^31-1. */
int fcgi_append_pair(struct buffer *out, const char *name, size_t name_length, const char *value,
                     size_t value_length);

/* Appends len bytes of a stream (PARAMS, STDIN) as records of at most
 * FCGI_MAX_CONTENT bytes, each padded to a multiple of 8; len 0 appends
 * the empty record that ends the stream. Returns 0 or -1 (out of memory). */
int fcgi_append_stream(struct buffer *out, enum fcgi_type type, const char *data, size_t len);

/* Reads one name-value pair from data[0..len): sets the spans and
 * *used. Returns 0, or -1 when the bytes do not hold a whole pair. */
int fcgi_pair_decode(const char *data, size_t len, size_t *used, const char **name, size_t *name_length,
                     const char **value, size_t *value_length);

/* The streaming parser of what a responder sends. */
struct fcgi_parser {
    unsigned char header[FCGI_HEADER_LEN];
    size_t header_have;      /* bytes of the current header held */
    int type;                /* of the record whose content is being read; 0: in a header */
    size_t content_left;     /* its content bytes still to come */
    size_t padding_left;     /* then its padding */
    unsigned char end_body[8];
    size_t end_have;         /* END_REQUEST's body bytes held */
    bool ended;              /* END_REQUEST came: the response is over */
    const char *error;       /* why the bytes were refused; NULL: none */
};

enum fcgi_result {
    FCGI_MORE,       /* every byte given was used; no event */
    FCGI_EVENT,      /* *event is filled (bytes may be left: call again) */
    FCGI_ERROR,      /* refused: parser->error says why; feed no more */
};

enum fcgi_event_kind { FCGI_EVENT_STDOUT, FCGI_EVENT_STDERR, FCGI_EVENT_END };

struct fcgi_event {
    enum fcgi_event_kind kind;
    const char *data;          /* STDOUT, STDERR: bytes of the stream, within the input */
    size_t length;
    uint32_t app_status;       /* END: the application's exit status */
    int protocol_status;       /* END: enum fcgi_protocol_status (or another value) */
};

/* Readies p for a response. */
void fcgi_parser_init(struct fcgi_parser *p);

/* Parses from data[0..len), however the bytes were split: consumes
 * bytes up to and including the next event and sets *used (bytes taken).
 * Refused: a version other than 1, a request id other than 1, a record
 * type other than STDOUT, STDERR, END_REQUEST, an END_REQUEST whose
 * content is not 8 bytes, any byte after END_REQUEST. Empty STDOUT and
 * STDERR records (their streams' ends) give no event. */
enum fcgi_result fcgi_parse(struct fcgi_parser *p, const char *data, size_t len, size_t *used,
                            struct fcgi_event *event);

/* The longest CGI head rsp reads from a script's output (as a backend's
 * HTTP head may be). */
#define FCGI_CGI_HEAD_MAX 65536

/* Reads the CGI response head (RFC 3875, section 6) at the start of a
 * script's output data[0..len): header lines, each ended by LF or CRLF,
 * then an empty line. Writes the HTTP/1.1 head it means to out: a status
 * line ("Status: NNN reason" if there is one; else 302 when there is a
 * Location, else 200), then every other field as it came, each line ended
 * with CRLF, then CRLF. Returns the CGI head's length in data (the body
 * follows it), 0 if the empty line has not come yet, or -1 when it is
 * malformed (a line without a colon, a field name that is not a token, a
 * Status that is not three digits from 200 to 599, no empty line within
 * FCGI_CGI_HEAD_MAX bytes) or out of memory. */
ssize_t fcgi_cgi_head(const char *data, size_t len, struct buffer *out);

#endif
