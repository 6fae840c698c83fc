/* producer.h -- what answers a request: the exchange's producer.
 *
 * A producer makes the response: its head (a struct response_head, handed
 * to body_filter_head) and then its body (body_filter_data, and
 * body_filter_end or exchange_response_finished at its end), with the
 * client's queue as its backpressure: it stops producing while
 * buffering_client_full is true, and is resumed when the client has taken
 * its queue down (buffering_client_ready). Each producer starts by a
 * function of its own, which sets x->producer: exchange_connect (the
 * backend, exchange_response.c), exchange_answer_ourselves (rsp's own
 * answer, exchange.c) and exchange_serve_file (a file, exchange_file.c). */
#ifndef RSP_PRODUCER_H
#define RSP_PRODUCER_H

struct relay;

struct producer_ops {
    /* The client's queue is below the low-water mark again: produce on.
     * NULL: it never waits (its whole answer is queued at once). */
    void (*resume)(struct relay *relay);
    /* The exchange ends, or fails, before or after the response's end:
     * let go of what the producer holds. NULL: it holds nothing. */
    void (*stop)(struct relay *relay);
};

#endif
