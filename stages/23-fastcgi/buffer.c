/* buffer.c -- the byte queue behind each connection's pending writes. */
#include "buffer.h"

#include <stdlib.h>
#include <string.h>

int buffer_append(struct buffer *b, const char *data, size_t len)
{
    size_t used = buffer_length(b);

    if (b->end + len > b->capacity) {
        if (used + len <= b->capacity / 2) {
            /* Plenty of room once the consumed front is reclaimed. */
            memmove(b->data, b->data + b->start, used);
        } else {
            size_t capacity = b->capacity ? b->capacity : 4096;
            char *data;

            while (capacity < used + len)
                capacity *= 2;
            data = malloc(capacity);
            if (data == NULL)
                return -1;
            if (used > 0)
                memcpy(data, b->data + b->start, used);
            free(b->data);
            b->data = data;
            b->capacity = capacity;
        }
        b->start = 0;
        b->end = used;
    }
    memcpy(b->data + b->end, data, len);
    b->end += len;
    return 0;
}

void buffer_consume(struct buffer *b, size_t len)
{
    b->start += len;
    if (b->start == b->end)
        buffer_free(b);
}

void buffer_free(struct buffer *b)
{
    free(b->data);
    b->data = NULL;
    b->start = b->end = b->capacity = 0;
}
