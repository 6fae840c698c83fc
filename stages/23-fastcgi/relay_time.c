/* relay_time.c -- the deadlines of a relay.
 *
 * Every wait has a bound. One timer per relay is armed for whichever
 * deadline comes first of those that apply in its phase:
 *
 *   phase        waiting for                          deadline
 *   HEAD         a first request head                 accepted + header_timeout
 *   HEAD         a later request to begin             last exchange + keepalive_timeout
 *   HEAD         the rest of a later request head     its first byte + header_timeout
 *   CONNECTING   the backend to accept                attempt + connect_timeout
 *   BODY         the next piece of the request body   last read + body_timeout
 *   BUFFER       the next piece of the request body   last read + body_timeout
 *   BUFFER       the body, at body_min_rate on average  (buffering.c)
 *   (sent)       the first byte of the response       request sent + response_timeout
 *   (answered)   the client to hang up, if it may     last event + RELAY_LINGER
 *                still send (relay.c: client_may_send)
 *   always       any byte at all, either way          last event + idle_timeout
 *
 * An HTTP/2 stream is a relay with these deadlines of its own (its head
 * is whole from the start). Its connection waits for a stream to begin,
 * with none open, until the last one ended + keepalive_timeout, then
 * sends GOAWAY and closes once it is taken (or RELAY_LINGER has passed);
 * with streams open, for any byte until last event + idle_timeout.
 *
 * After every event relay_settle_or_close re-arms the timer; moving a
 * deadline later costs nothing (timer.h). */
#include "relay_private.h"

#include "buffering.h"
#include "log.h"
#include "stats.h"

#include <errno.h>
#include <stddef.h>


/* The deadlines a relay can be waiting for. */
enum deadline {
    DEADLINE_HEADER, DEADLINE_CONNECT, DEADLINE_BODY, DEADLINE_RESPONSE, DEADLINE_LINGER,
    DEADLINE_IDLE, DEADLINE_KEEPALIVE, DEADLINE_BODY_RATE,
};

static const char *const deadline_names[] = {
    [DEADLINE_HEADER] = "header_timeout", [DEADLINE_CONNECT] = "connect_timeout",
    [DEADLINE_BODY] = "body_timeout", [DEADLINE_RESPONSE] = "response_timeout",
    [DEADLINE_LINGER] = "linger", [DEADLINE_IDLE] = "idle_timeout",
    [DEADLINE_KEEPALIVE] = "keepalive_timeout", [DEADLINE_BODY_RATE] = "body_min_rate",
};

static void consider(double *best, enum deadline *which, double when, enum deadline kind)
{
    if (when < *best) {
        *best = when;
        *which = kind;
    }
}

/* The earliest of the deadlines that apply to the relay now, and which it
 * is. Silence both ways is always bounded; the others depend on what we
 * wait for. */
static double next_deadline(const struct relay *relay, enum deadline *which)
{
    const struct timeouts *t = &relay->config->timeouts;
    const struct exchange *x = relay->x;
    const struct connection *client = &relay->client, *backend = relay_backend(relay);
    double best = relay->last_activity + t->idle;
    bool idle;

    *which = DEADLINE_IDLE;
    if (relay->h2 != NULL) {
        /* HTTP/2 (h2_relay.c): its streams have deadlines of their own;
         * once told to go for its idleness, or once its last GOAWAY is
         * out, it has RELAY_LINGER to take it and hang up. */
        if (relay->give_up_at > 0) {
            *which = DEADLINE_LINGER;
            return relay->give_up_at;
        }
        best = h2_relay_deadline(relay, &idle);
        *which = idle ? DEADLINE_IDLE : DEADLINE_KEEPALIVE;
        return best;
    }
    /* Between two requests, the client has keepalive_timeout to begin the
     * next; once it has, header_timeout to finish its head. */
    if (x->phase == PHASE_HEAD && relay->served > 0 && x->head_started == 0)
        consider(&best, which, relay->idle_since + relay->config->keepalive.timeout,
                 DEADLINE_KEEPALIVE);
    else if (x->phase == PHASE_HEAD)
        consider(&best, which, (relay->served == 0 ? relay->accepted : x->head_started) + t->header,
                 DEADLINE_HEADER);
    if (x->phase == PHASE_CONNECTING)
        consider(&best, which, x->attempt_started + t->connect, DEADLINE_CONNECT);
    /* A client paused by backpressure waits for the backend, not the
     * other way round: its silence is not its fault. */
    if ((x->phase == PHASE_BODY || x->phase == PHASE_BUFFER) && !client->paused && !client->read_done)
        consider(&best, which, x->last_body_read + t->body, DEADLINE_BODY);
    if (x->phase == PHASE_BUFFER)
        consider(&best, which, buffering_rate_deadline(relay), DEADLINE_BODY_RATE);
    if (x->request_sent > 0 && !x->response_started && backend != NULL && !backend->read_done)
        consider(&best, which, x->request_sent + t->response, DEADLINE_RESPONSE);
    if (client->write_done && !client->read_done)
        consider(&best, which, relay->last_activity + RELAY_LINGER, DEADLINE_LINGER);
    if (relay->give_up_at > 0)
        consider(&best, which, relay->give_up_at, DEADLINE_LINGER);
    return best;
}

/* Logs a timeout once, naming the client, the backend and the timeout,
 * and counts it: a timeout counted is a timeout logged. */
static void log_timeout(const struct relay *relay, enum deadline which, const char *what)
{
    static const enum stats_timeout kinds[] = {
        [DEADLINE_HEADER] = TIMEOUT_HEADER, [DEADLINE_CONNECT] = TIMEOUT_CONNECT,
        [DEADLINE_BODY] = TIMEOUT_BODY, [DEADLINE_RESPONSE] = TIMEOUT_RESPONSE,
        [DEADLINE_LINGER] = TIMEOUT_IDLE, [DEADLINE_IDLE] = TIMEOUT_IDLE,
        [DEADLINE_KEEPALIVE] = TIMEOUT_IDLE, [DEADLINE_BODY_RATE] = TIMEOUT_BODY,
    };
    const struct timeouts *t = &relay->config->timeouts;
    const double seconds[] = {
        [DEADLINE_HEADER] = t->header, [DEADLINE_CONNECT] = t->connect,
        [DEADLINE_BODY] = t->body, [DEADLINE_RESPONSE] = t->response,
        [DEADLINE_LINGER] = RELAY_LINGER, [DEADLINE_IDLE] = t->idle,
        [DEADLINE_KEEPALIVE] = relay->config->keepalive.timeout,
        [DEADLINE_BODY_RATE] = relay->config->buffering.body_min_rate,
    };

    log_msg(which == DEADLINE_BODY_RATE ? "%s (%g bytes/s) fired: client %s, backend %s: %s"
                                        : "%s (%g s) fired: client %s, backend %s: %s",
            deadline_names[which], seconds[which], relay->client_address,
            relay->x->current != NULL ? relay->x->current->name : "none", what);
    stats_count_timeout(kinds[which]);
}

/* We answered because of a timeout: unless the connection stays open for
 * another request, stop reading, and close once the answer is out or
 * RELAY_LINGER has passed, whichever comes first. */
static void give_up(struct relay *relay)
{
    if (relay->x->phase != PHASE_DRAIN)
        return;
    relay->client.read_done = true;
    relay->give_up_at = reactor_now() + RELAY_LINGER;
}

/* Ends the relay at once, both sides, without an answer. */
static void cut_off(struct relay *relay)
{
    relay->client_ops->fail(relay);
}

/* A connect took too long: to the client, the same as a refused one. */
static void connect_timed_out(struct relay *relay)
{
    bool retry;

    log_timeout(relay, DEADLINE_CONNECT, "the backend did not accept the connection");
    retry = exchange_attempt_failed(relay, ETIMEDOUT);
    exchange_release_backend(relay);
    if (retry)
        exchange_connect(relay, 504);
    else
        exchange_fail_request(relay, 504);
}

static void deadline_passed(struct relay *relay, enum deadline which)
{
    switch (which) {
    case DEADLINE_HEADER:
        /* A connection that never said a word gets no answer: browsers
         * open spare connections they may never use. */
        if (buffer_length(&relay->head) == 0) {
            cut_off(relay);
            return;
        }
        log_timeout(relay, which, "the request head did not arrive in time; answered 408");
        exchange_fail_request(relay, 408);
        give_up(relay);
        break;
    case DEADLINE_CONNECT:
        connect_timed_out(relay);
        break;
    case DEADLINE_BODY:
        log_timeout(relay, which, relay->x->response_started ? "the request body stalled; closed"
                                                            : "the request body stalled; answered 408");
        if (relay->x->response_started)
            cut_off(relay);
        else
            exchange_fail_request(relay, 408);
        give_up(relay);
        break;
    case DEADLINE_RESPONSE:
        log_timeout(relay, which, "the backend did not begin its response; answered 504");
        exchange_fail_request(relay, 504);
        give_up(relay);
        break;
    case DEADLINE_BODY_RATE:
        log_timeout(relay, which, "the request body came too slowly; answered 408");
        exchange_fail_request(relay, 408);
        give_up(relay);
        break;
    case DEADLINE_LINGER:
        cut_off(relay);
        break;
    case DEADLINE_IDLE:
        log_timeout(relay, which, "no byte either way; closed");
        cut_off(relay);
        break;
    case DEADLINE_KEEPALIVE:
        /* An idle keep-alive connection: closed in silence, or for HTTP/2
         * after a GOAWAY (RFC 9113, 9.1: the client then knows it may not
         * reuse it, and no stream it sent meanwhile is lost unsaid). */
        if (relay->h2 != NULL) {
            h2_relay_goaway(relay);
            relay->give_up_at = reactor_now() + RELAY_LINGER;
        } else {
            cut_off(relay);
        }
        break;
    }
}

static void relay_timer_fired(struct timer *timer)
{
    struct relay *relay = timer->closure;
    enum deadline which;

    /* The timer carries the earliest deadline as it was when armed; what
     * happened since may have moved it (settle re-arms after each event). */
    if (next_deadline(relay, &which) <= reactor_now())
        deadline_passed(relay, which);
    relay_settle_or_close(relay);
}

void relay_time_start(struct relay *relay)
{
    timer_init(&relay->timer, relay_timer_fired, relay);
    relay->accepted = relay->last_activity = reactor_now();
}

int relay_time_arm(struct relay *relay)
{
    enum deadline which;

    return timer_arm(&relay->timer, next_deadline(relay, &which));
}
