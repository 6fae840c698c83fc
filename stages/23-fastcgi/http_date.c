/* http_date.c -- writing and reading HTTP-dates (see http_date.h). By
 * hand rather than strftime/strptime: their day and month names follow
 * the locale, and strptime accepts far more than RFC 9110 allows. */
#define _GNU_SOURCE /* timegm */
#include "http_date.h"

#include <stdbool.h>
#include <string.h>

static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char *const long_days[7] = { "Sunday", "Monday", "Tuesday", "Wednesday",
                                          "Thursday", "Friday", "Saturday" };
static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

/* Writes the two digits of n (0..99) at out. */
static void put2(char *out, int n)
{
    out[0] = (char)('0' + n / 10);
    out[1] = (char)('0' + n % 10);
}

int http_date_format(time_t t, char out[HTTP_DATE_SIZE])
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
        return -1;
    int year = tm.tm_year + 1900;
    memcpy(out, days[tm.tm_wday], 3);
    memcpy(out + 3, ", ", 2);
    put2(out + 5, tm.tm_mday);
    out[7] = ' ';
    memcpy(out + 8, months[tm.tm_mon], 3);
    out[11] = ' ';
    put2(out + 12, year / 100);
    put2(out + 14, year % 100);
    out[16] = ' ';
    put2(out + 17, tm.tm_hour);
    out[19] = ':';
    put2(out + 20, tm.tm_min);
    out[22] = ':';
    put2(out + 23, tm.tm_sec);
    memcpy(out + 25, " GMT", 5); /* with the NUL */
    return 0;
}

/* The value of the n digits at s, or -1 if one is not a digit. */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* The month (0..11) whose three-letter name is at s (case-sensitive, as
 * the grammar's literals are), or -1. */
static int month_of(const char *s)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(s, months[i], 3) == 0)
            return i;
    return -1;
}

/* Whether the three bytes at s are a day name. */
static bool is_day(const char *s)
{
    for (int i = 0; i < 7; i++)
        if (memcmp(s, days[i], 3) == 0)
            return true;
    return false;
}

/* Reads "HH:MM:SS" at s into tm; false if malformed or out of range (a
 * leap second, :60, is allowed, as in IMF). */
static bool time_of_day(const char *s, struct tm *tm)
{
    if (s[2] != ':' || s[5] != ':')
        return false;
    tm->tm_hour = digits(s, 2);
    tm->tm_min = digits(s + 3, 2);
    tm->tm_sec = digits(s + 6, 2);
    return tm->tm_hour >= 0 && tm->tm_hour <= 23 && tm->tm_min >= 0 && tm->tm_min <= 59 &&
           tm->tm_sec >= 0 && tm->tm_sec <= 60;
}

/* Whether tm's day of month exists in its month and year. */
static bool day_exists(const struct tm *tm)
{
    static const int length[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int year = tm->tm_year + 1900;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    int last = length[tm->tm_mon] + (tm->tm_mon == 1 && leap);
    return tm->tm_mday >= 1 && tm->tm_mday <= last;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
static bool imf_fixdate(const char *s, size_t n, struct tm *tm)
{
    if (n != 29 || !is_day(s) || memcmp(s + 3, ", ", 2) != 0 || s[7] != ' ' || s[11] != ' ' ||
        s[16] != ' ' || memcmp(s + 25, " GMT", 4) != 0)
        return false;
    tm->tm_mday = digits(s + 5, 2);
    tm->tm_mon = month_of(s + 8);
    int year = digits(s + 12, 4);
    if (tm->tm_mon < 0 || year < 0 || !time_of_day(s + 17, tm))
        return false;
    tm->tm_year = year - 1900;
    return true;
}

/* This year, for RFC 850's two-digit years. */
static int current_year(void)
{
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm))
        return 2000;
    return tm.tm_year + 1900;
}

/* "Sunday, 06-Nov-94 08:49:37 GMT" */
static bool rfc850(const char *s, size_t n, struct tm *tm)
{
    size_t day = 0;
    for (int i = 0; i < 7 && !day; i++) {
        size_t l = strlen(long_days[i]);
        if (n > l && memcmp(s, long_days[i], l) == 0)
            day = l;
    }
    if (!day || n != day + 24)
        return false;
    s += day; /* ", 06-Nov-94 08:49:37 GMT" */
    if (memcmp(s, ", ", 2) != 0 || s[4] != '-' || s[8] != '-' || s[11] != ' ' ||
        memcmp(s + 20, " GMT", 4) != 0)
        return false;
    tm->tm_mday = digits(s + 2, 2);
    tm->tm_mon = month_of(s + 5);
    int yy = digits(s + 9, 2);
    if (tm->tm_mon < 0 || yy < 0 || !time_of_day(s + 12, tm))
        return false;
    int now = current_year();
    int year = now - now % 100 + yy;
    if (year > now + 50)
        year -= 100;
    tm->tm_year = year - 1900;
    return true;
}

/* "Sun Nov  6 08:49:37 1994" (a one-digit day after two spaces) */
static bool asctime_date(const char *s, size_t n, struct tm *tm)
{
    if (n != 24 || !is_day(s) || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ')
        return false;
    tm->tm_mon = month_of(s + 4);
    tm->tm_mday = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
    int year = digits(s + 20, 4);
    if (tm->tm_mon < 0 || year < 0 || !time_of_day(s + 11, tm))
        return false;
    tm->tm_year = year - 1900;
    return true;
}

int http_date_parse(const char *s, size_t length, time_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!imf_fixdate(s, length, &tm) && !rfc850(s, length, &tm) && !asctime_date(s, length, &tm))
        return -1;
    if (!day_exists(&tm))
        return -1;
    *out = timegm(&tm); /* years 0..9999 fit a 64-bit time_t: it cannot fail */
    return 0;
}
