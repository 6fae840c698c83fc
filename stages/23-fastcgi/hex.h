/* hex.h -- the value of a hexadecimal digit, for the chunk sizes of body.c
 * and the percent-escapes of path.c. */
#ifndef RSP_HEX_H
#define RSP_HEX_H

/* 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other byte. */
static inline int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
