/* buffer.h -- a growable byte queue: append at the end, consume from the
 * front. Used for the bytes a connection could not write yet. */
#ifndef RSP_BUFFER_H
#define RSP_BUFFER_H

#include <stddef.h>

struct buffer {
    char *data;       /* NULL while empty: an idle connection costs no memory */
    size_t start;     /* first byte not yet consumed */
    size_t end;       /* one past the last byte appended */
    size_t capacity;
};

#define BUFFER_INIT { NULL, 0, 0, 0 }

/* Bytes waiting in the buffer. */
static inline size_t buffer_length(const struct buffer *b) { return b->end - b->start; }

/* The unread bytes, buffer_length(b) of them. Never NULL, even for an
 * empty buffer (whose data is NULL), so it can go wherever bytes are
 * expected. */
static inline const char *buffer_bytes(const struct buffer *b)
{
    return b->data != NULL ? b->data + b->start : "";
}

/* Appends len bytes. Returns 0, or -1 if memory ran out (buffer unchanged). */
int buffer_append(struct buffer *b, const char *data, size_t len);

/* Drops the first len bytes (len <= buffer_length). Frees the memory once
 * the buffer is empty. */
void buffer_consume(struct buffer *b, size_t len);

/* Frees everything; the buffer is empty and reusable afterwards. */
void buffer_free(struct buffer *b);

#endif
