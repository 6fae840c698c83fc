/* relay_private.h -- what relay.c, relay_time.c, buffering.c, h2_relay.c
 * and the exchange's files (exchange.c, exchange_request.c,
 * exchange_response.c, exchange_file.c, access_log_capture.c) share: the relay (one client
 * connection, or one HTTP/2 stream of one) and the exchange it is serving
 * (one request and its response). Private to those files. */
#ifndef RSP_RELAY_PRIVATE_H
#define RSP_RELAY_PRIVATE_H

#include "backend.h"
#include "body_filter.h"
#include "buffer.h"
#include "config.h"
#include "connection.h"
#include "encoder.h"
#include "http.h"
#include "limit.h"
#include "producer.h"
#include "reactor.h"
#include "relay.h"
#include "request.h"
#include "response.h"
#include "response_head.h"
#include "timer.h"
#include "upstream.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#define RELAY_READ_SIZE 16384
#define RELAY_READS_PER_EVENT 4          /* then let other connections run */
#define RELAY_HIGH_WATER (64 * 1024)
#define RELAY_LOW_WATER (16 * 1024)
#define RELAY_DRAIN_LIMIT (1024 * 1024)  /* most we drop before giving up on a client */
#define RELAY_SPLICE_TAIL (RELAY_READ_SIZE / 2) /* a body's last bytes are read, not spliced */
/* Seconds a client we have answered may take to hang up, between two
 * reads; and that we keep a connection after a timeout answered it (or,
 * HTTP/2, after its last GOAWAY). */
#define RELAY_LINGER 5.0

struct body_buffer;
struct fastcgi_request;
struct file_body;
struct relay;
struct response_spool;

/* The client side of a relay: how the answers of its exchanges reach the
 * client, and how much of them waits on the way. A relay is one HTTP/1
 * client connection (relay.c: these write into its socket's queue) or one
 * HTTP/2 stream (h2_relay.c: these go through its connection's session).
 * The exchange's files reach the client only through these; relay->client's
 * flags (read_done, write_done, paused, broken, piped) are the client
 * side's state either way (a stream's has no socket: connection_init_none). */
struct client_ops {
    /* A response head, interim (1xx) or final, written out for the
     * client: HTTP/1 adds rsp's HSTS line to a final head on an HTTPS
     * connection (relay->tls) and the Connection line for mode; HTTP/2
     * sends its fields as the stream's HEADERS, with the HSTS field.
     * head->body NONE: nothing follows it. Returns 0, or -1 if out of
     * memory. */
    int (*head)(struct relay *relay, const struct response_head *head, enum response_connection mode);
    /* "100 Continue": the client may send its body. */
    void (*proceed)(struct relay *relay);
    /* Bytes of a response body (or of a tunnel). */
    void (*write)(struct relay *relay, const char *data, size_t length);
    /* Bytes queued for the client and not taken yet (spliced ones too). */
    size_t (*queued)(const struct relay *relay);
    /* Nothing follows what is queued: the end of the response. */
    void (*end)(struct relay *relay);
    /* Cuts the client off at once: what is queued is dropped. */
    void (*fail)(struct relay *relay);
    /* A head held with its body's first bytes (hold) is taken back: true
     * if the client has had nothing of the response (connection_drop_held). */
    bool (*take_back)(struct relay *relay);
    /* Holds writes so that they leave together (on), or lets them go;
     * NULL when nothing is gained by it. */
    void (*hold)(struct relay *relay, bool on);
    /* Moves up to len bytes from the backend's socket to the client's
     * without copying them (connection_splice_from); NULL when the client
     * side cannot splice. */
    ssize_t (*splice_from)(struct relay *relay, struct connection *from, size_t len);
    /* Sends up to len bytes of the file fd from *offset to the client
     * with sendfile(2) (connection_sendfile), advancing *offset; NULL when
     * the client side cannot (TLS, HTTP/2). */
    ssize_t (*send_file)(struct relay *relay, int fd, off_t *offset, size_t len);
    /* An HTTP/2 stream: it carries one exchange (never kept for another),
     * and a body goes as its bytes alone (never chunked). */
    bool is_stream;
};

struct h2_client;

/* Where the request of an exchange is (the response has its own state). */
enum phase {
    PHASE_HEAD,         /* reading the request head */
    PHASE_BUFFER,       /* routed; reading the whole body before a backend
                           is chosen (chapter 17) */
    PHASE_CONNECTING,   /* routed; waiting for a backend connection */
    PHASE_BODY,         /* head sent; forwarding the body */
    PHASE_SENT,         /* the whole request is read: the client is not read
                           (what it sends next is the next request) */
    PHASE_DRAIN,        /* the connection closes after this response: what
                           the client sends is read and dropped */
    PHASE_TUNNEL,       /* after a 101: bytes both ways, unexamined */
};

/* One request and its response: from the request's first byte to the
 * response's last (exchange.c). */
struct exchange {
    enum phase phase;
    struct http_request *request;    /* from the first byte until the head is sent; else NULL */
    struct request_info info;        /* its spans are valid while request is */
    int minor_version;               /* the client's HTTP/1.x */
    bool head_method;                /* a HEAD request: answers carry no body */
    char client_address[INET6_ADDRSTRLEN]; /* the request's client (exchange_find_client);
                                              "" until its head is read */
    bool chain_believed;             /* its X-Forwarded-For is passed on (trusted_proxies
                                        unset, or the peer is in it) */
    bool request_complete;           /* every byte of the request was read */
    bool client_keep_alive;          /* the client asked to keep the connection */
    bool upgrade;                    /* the request asks for an upgrade (WebSocket) */
    struct pool *pool;               /* chosen by route, or by Host */
    const struct site *output_site;  /* the site its Host names, or NULL: whose output
                                        settings apply (response_output.h) */
    enum encoding accepted;          /* the best coding its Accept-Encoding allows
                                        (filter_compress.h), read with the head */
    struct stats_site *site;         /* where it counts: the site its Host names */
    const struct site *log_site;     /* that site, if some site has its own access log */
    struct backend *current;         /* the backend tried or in use, or NULL */
    const struct addrinfo *address;  /* which of its addresses */
    uint64_t tried;                  /* backends tried for this request */
    uint64_t balance_key;            /* the hash of its hash_key, for balance = "hash" */
    struct upstream *upstream;       /* the backend connection, or NULL */
    bool reused;                     /* it came from the idle pool */
    bool retried;                    /* the pooling race was met once already */
    struct buffer replay;            /* the request as sent on a reused connection, to
                                        send again should that connection turn out dead */
    struct body_buffer *body_buffer; /* the body read whole (buffering.c), or NULL */
    uint64_t body_streamed;          /* or, streamed: the bytes of it forwarded so far */
    uint64_t max_body;               /* max_body_size of its site, pool or the top level
                                        (exchange_admit); 0: no limit */

    /* The response. */
    bool response_began;             /* a byte came from the backend */
    bool response_started;           /* a byte of the response reached the client's queue */
    bool response_done;              /* its last byte did */
    bool keep_client;                /* the client connection stays open after it */
    bool upstream_reusable;          /* the backend connection can carry another request */
    struct http_request *response;   /* the parser's state while reading a head */
    struct buffer response_head;     /* the head as it arrives */
    enum response_framing framing;
    struct body_framer response_body;
    bool dechunk;                    /* chunked, to an HTTP/1.0 client or a stream: the data alone */
    size_t drained;                  /* bytes dropped in PHASE_DRAIN */
    bool response_buffered;          /* it may wait in rsp for a slow client (buffering.c) */
    struct response_spool *response_spool; /* what waits beyond the client's queue, or NULL */
    const struct producer_ops *producer; /* what answers it (producer.h), or NULL: none yet */
    struct body_filter *filters;     /* the chain to the client (body_filter.h); NULL: none */
    bool chunked;                    /* rsp frames the body in chunks (body_filter_head) */
    bool replaced;                   /* a backend's error answer replaced by an error page:
                                        its body is read and dropped */
    struct file_body *file;          /* a file being sent (exchange_file.c), or NULL */
    struct fastcgi_request *fastcgi; /* the script a FastCGI backend runs, and its
                                        response's reading (backend_fastcgi.c), or NULL */

    /* Time (reactor_now() seconds): see relay_time.c. */
    double head_started;             /* the head's first byte came; 0: not yet */
    double attempt_started;          /* the connect under way started */
    double head_sent;                /* the request head was queued for the backend */
    double last_body_read;           /* body bytes last came from the client */
    double request_sent;             /* the whole request was queued for the backend; 0: not yet */

    /* For the access log (access_log_capture.c). */
    int status;                      /* of the response the client gets; 0: none yet */
    uint64_t body_bytes;             /* of it, queued for the client */
    double response_ended;           /* its last byte was queued; 0: not yet */
    bool log_captured;               /* log_fields holds the request's fields */
    struct buffer log_fields;        /* request line, Referer, User-Agent, Host, if there is a log */
    size_t log_lengths[4];           /* their lengths; SIZE_MAX: not there */
};

/* One client connection (relay.c), or one HTTP/2 stream of one (h2_relay.c:
 * parent set, no socket of its own). */
struct relay {
    struct reactor_deferred deferred; /* first: frees the relay at the end of the batch */
    struct relay_set *set;           /* the relays alive, a list through prev/next */
    struct relay *prev, *next;
    struct connection client;
    const struct client_ops *client_ops; /* how the exchanges reach the client */
    bool tls;                        /* it came to the HTTPS port */
    struct config *config;           /* held: the generation its request began in */
    struct buffer head;              /* what the client sent that is not used yet: the
                                        request head, and whatever came after it */
    unsigned served;                 /* exchanges finished on this connection */
    char client_address[INET6_ADDRSTRLEN];
    unsigned short client_port;      /* its port (FastCGI's REMOTE_PORT) */
    bool conn_counted;               /* limit_conn counts it under conn_key (limit.h) */
    bool over_conn_limit;            /* its first request gets 429 and it closes */
    struct limit_key conn_key;
    char server_port[6];             /* the port the client connected to */
    struct exchange *x;              /* the request being served; between requests the
                                        shared exchange_idle, so that an idle connection
                                        holds no exchange (exchange_begin) */

    /* HTTP/2 (h2_relay.c). */
    struct h2_client *h2;            /* the client chose h2: the session and its streams;
                                        NULL for HTTP/1 */
    struct relay *parent;            /* a stream's relay (it has no socket): its
                                        connection's; NULL for a connection */
    int32_t stream_id;               /* the stream's id */
    size_t unconsumed;               /* request body bytes of it not yet given back to
                                        the client's window (h2_consume) */
    bool chunked_body;               /* its body, of unknown length, goes chunked */

    /* Time (reactor_now() seconds): see relay_time.c. */
    struct timer timer;
    double accepted;                 /* the client connected */
    double last_activity;            /* an event on either socket */
    double idle_since;               /* the last exchange finished (keepalive_timeout) */
    double give_up_at;               /* a timeout answered: close by then; 0: none */
};

/* The backend connection's socket side, or NULL when there is none. */
static inline struct connection *relay_backend(const struct relay *relay)
{
    return relay->x->upstream != NULL ? &relay->x->upstream->conn : NULL;
}

/* rsp's Strict-Transport-Security line (config tls.hsts) for a head sent
 * to the client: on an HTTPS connection, for a final head (and a 101);
 * else "". */
static inline const char *relay_hsts_line(const struct relay *relay, const struct response_head *head)
{
    if (!relay->tls || (head->status < 200 && head->status != 101))
        return "";
    return relay->config->tls.hsts_line;
}

/* exchange.c, exchange_request.c and exchange_response.c */

/* What an idle relay's x points to: an exchange in PHASE_HEAD with nothing
 * in it, read-only (a write to it faults). */
extern const struct exchange exchange_idle;

/* Gives the relay an exchange of its own, if it has exchange_idle: returns
 * relay->x, or NULL when out of memory. */
struct exchange *exchange_begin(struct relay *relay);

/* Frees the relay's own exchange, if it has one (after exchange_free), and
 * gives it exchange_idle again. */
void exchange_release(struct relay *relay);

/* Bytes arrived from the client, in the phase the exchange is in. */
void exchange_client_data(struct relay *relay, const char *data, size_t len);

/* The client finished sending (end of file). */
void exchange_client_finished(struct relay *relay);

/* An event on the backend connection. */
void exchange_upstream_event(void *relay, uint32_t events);

/* The request cannot go on: answers it with `status` (or cuts the client
 * off if part of a response was already sent) and drops the backend. The
 * client connection stays open if the request was read whole and may; else
 * it closes after the answer, and what the client sends is drained. */
void exchange_fail_request(struct relay *relay, int status);

/* As exchange_fail_request, with `headers` ("Name: value\r\n" lines, or
 * NULL) in the answer, and the connection closed after it if `close`:
 * rsp refusing a client (chapter 22: 429, ...). */
void exchange_refuse(struct relay *relay, int status, const char *headers, bool close);

/* The request's client as text (x->client_address once set, else the
 * connection's): what X-Forwarded-For, route, the access log, limits and
 * allow/deny see. */
const char *exchange_client(const struct relay *relay);

/* The key of relay's client in limit.h's table at `level`: the one place
 * the client's address becomes limit.h's binary form. Returns 0, or -1 if
 * it has none (then no limit applies). */
int relay_client_key(const struct relay *relay, uint32_t level, struct limit_key *key);

/* The exchange is finished and the client connection stays open: starts
 * the next one, with the bytes the client already sent, if any. Call only
 * when x->response_done && x->keep_client && x->phase == PHASE_SENT. */
void exchange_next(struct relay *relay);

/* Where the client's unused bytes start. */
static inline const char *relay_bytes(const struct relay *relay)
{
    return buffer_bytes(&relay->head);
}

/* The exchange's request as the checks and route() see it (request.h),
 * while x->request holds its parsed head: its spans point into the
 * relay's buffer, so it is made anew each time (the buffer may move). A
 * stream's is the HTTP/1.1 head it stands for (h2_relay.c). */
static inline struct request_view relay_request_view(const struct relay *relay)
{
    struct request_view view = request_view_of(relay->x->request, relay_bytes(relay));

    view.http2 = relay->client_ops->is_stream;
    return view;
}

/* A connect to the current backend failed with `error`: returns false if
 * the shortage is ours (out of fds, memory, ports), true if trying another
 * backend makes sense (and then marks this one down once every address of
 * it has failed). */
bool exchange_attempt_failed(struct relay *relay, int error);

/* Closes the backend connection, if any. */
void exchange_release_backend(struct relay *relay);
/* Writes body bytes of the request (as the client framed them: the
 * body's bytes alone unless the pool's protocol passes them through) to
 * the backend connection, as its protocol frames them. Returns 0, or -1
 * when out of memory: the request was failed (502). */
int exchange_write_body(struct relay *relay, const char *data, size_t len);
/* The request body is all written: writes what ends it, as the pool's
 * protocol wants. Returns 0, or -1 as exchange_write_body. */
int exchange_write_body_end(struct relay *relay);

/* Bytes of the response (or a tunnel) for the client, as they go out:
 * counted for the access log, then queued, or spooled while the client is
 * slow (chapter 17). */
void exchange_to_client(struct relay *relay, const char *data, size_t len);

/* Gets a backend connection for the request: an idle one of the next
 * backend, or a new connect to the next address or backend. If nothing is
 * left to try, answers `status` (502: and says the pool is unreachable). */
void exchange_connect(struct relay *relay, int status);

/* Resumes the exchange's producer if the client has taken its queue down
 * (buffering_client_ready) and the producer waits for that. */
void exchange_resume_producer(struct relay *relay);

/* Frees what the exchange holds. */
void exchange_free(struct relay *relay);

/* relay.c */

/* Applies the rules that link the two sides after anything happened, then
 * closes the relay if it is finished, or else brings both epoll
 * registrations and the timer up to date. */
void relay_settle_or_close(struct relay *relay);

/* A new request begins: the relay lets go of the generation it held and
 * holds the current one. Only between requests: an exchange in progress
 * points into its generation's pools. */
void relay_use_current_config(struct relay *relay);

/* Closes the client connection (and its backend, and for HTTP/2 its
 * streams) and frees the relay at the end of the reactor's batch. */
void relay_close(struct relay *relay);

/* h2_relay.c */

/* The TLS handshake chose h2: the relay becomes an HTTP/2 connection and
 * data, its first bytes, goes to its new session. Returns 0, or -1 if out
 * of memory (the relay stays HTTP/1, to be closed). */
int h2_relay_begin(struct relay *relay, const char *data, size_t len);

/* An event on an HTTP/2 connection's socket. */
void h2_relay_handle(struct relay *relay, uint32_t events);

/* relay_settle_or_close for an HTTP/2 connection or one of its streams:
 * settles every stream of the connection, then the connection, which may
 * close. */
void h2_relay_settle_or_close(struct relay *relay);

/* Tells an HTTP/2 connection's client to go (GOAWAY): streams in flight
 * finish, then it closes (relay_settle_or_close sees to it). */
void h2_relay_goaway(struct relay *relay);

/* An HTTP/2 connection closes: ends its streams' exchanges, frees its
 * session. */
void h2_relay_end(struct relay *relay);

/* The deadline of an HTTP/2 connection itself (its streams have their
 * own): keepalive_timeout after its last stream ended (*idle false), or
 * idle_timeout of silence while it has streams (*idle true). */
double h2_relay_deadline(const struct relay *relay, bool *idle);

/* relay_time.c */

/* Starts the clock of a relay whose client was just accepted. */
void relay_time_start(struct relay *relay);

/* Arms the relay's timer for the earliest deadline that applies now.
 * Returns 0, or -1 if out of memory. */
int relay_time_arm(struct relay *relay);

#endif
