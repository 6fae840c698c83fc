/* http_date.h -- HTTP-dates (RFC 9110 5.6.7): Last-Modified is written as
 * an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); If-Modified-Since,
 * If-Unmodified-Since and If-Range are read in any of the three forms a
 * recipient must accept: IMF-fixdate, the obsolete RFC 850 form ("Sunday,
 * 06-Nov-94 08:49:37 GMT") and C's asctime() form ("Sun Nov  6 08:49:37
 * 1994"). Nothing else is a date: no other spacing, no other zone, no
 * trailing bytes. */
#ifndef RSP_HTTP_DATE_H
#define RSP_HTTP_DATE_H

#include <stddef.h>
#include <time.h>

/* An IMF-fixdate is 29 bytes; with its NUL, 30. */
#define HTTP_DATE_SIZE 30

/* Writes t as an IMF-fixdate and a NUL to out; returns 0, or -1 (out
 * untouched) when t's year is outside 0..9999. */
int http_date_format(time_t t, char out[HTTP_DATE_SIZE]);

/* Reads the length bytes at s as an HTTP-date in one of the three forms;
 * returns 0 and the time in *out, or -1 for anything else (a wrong name,
 * a field out of range, a 31st of April, a byte too many). An RFC 850
 * two-digit year more than 50 years ahead of now is taken in the past
 * century, as RFC 9110 says. */
int http_date_parse(const char *s, size_t length, time_t *out);

#endif
