/* access_rules.c -- allow/deny by address and CIDR prefix (access_rules.h):
 * parsing the entries and finding the longest one that matches. */
#include "access_rules.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

/* The 12 bytes that begin an IPv4-mapped IPv6 address. */
static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

int access_address(const char *text, uint8_t out[16])
{
    struct in_addr v4;

    if (inet_pton(AF_INET, text, &v4) == 1) {
        memcpy(out, v4_mapped, sizeof v4_mapped);
        memcpy(out + 12, &v4, 4);
        return 0;
    }
    return inet_pton(AF_INET6, text, out) == 1 ? 0 : -1;
}

/* A whole number of at most three digits from text, not above max, into
 * *out. Returns 0, or -1. */
static int read_prefix(const char *text, unsigned max, unsigned *out)
{
    unsigned value = 0;
    size_t i = 0;

    for (; text[i] >= '0' && text[i] <= '9' && i < 3; i++)
        value = value * 10 + (unsigned)(text[i] - '0');
    if (i == 0 || text[i] != '\0' || value > max || (text[0] == '0' && i > 1))
        return -1;
    *out = value;
    return 0;
}

int access_rule_parse(const char *text, struct access_rule *rule)
{
    char address[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t length = slash != NULL ? (size_t)(slash - text) : strlen(text);
    unsigned prefix;
    bool v4;

    if (strcmp(text, "all") == 0) {
        memset(rule->address, 0, sizeof rule->address);
        rule->prefix = 0;
        return 0;
    }
    if (length == 0 || length >= sizeof address)
        return -1;
    memcpy(address, text, length);
    address[length] = '\0';
    v4 = strchr(address, ':') == NULL;
    if (access_address(address, rule->address) == -1)
        return -1;
    if (slash == NULL)
        prefix = v4 ? 32 : 128;
    else if (read_prefix(slash + 1, v4 ? 32 : 128, &prefix) == -1)
        return -1;
    rule->prefix = v4 ? prefix + 96 : prefix;
    /* Bits past the prefix are ignored: 10.1.2.3/8 means 10.0.0.0/8. */
    for (unsigned bit = rule->prefix; bit < 128; bit++)
        rule->address[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
    return 0;
}

/* True if the first `prefix` bits of a and b are the same. */
static bool same_prefix(const uint8_t a[16], const uint8_t b[16], unsigned prefix)
{
    unsigned whole = prefix / 8, rest = prefix % 8;

    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff00u >> rest);
    return (a[whole] & mask) == (b[whole] & mask);
}

bool access_rules_allow(const struct access_rule *rules, size_t count, bool has_allow,
                        const uint8_t address[16])
{
    int best = -1;              /* the longest matching prefix so far */
    bool allowed = !has_allow;

    for (size_t i = 0; i < count; i++) {
        const struct access_rule *r = &rules[i];

        if (!same_prefix(r->address, address, r->prefix))
            continue;
        if ((int)r->prefix > best || ((int)r->prefix == best && !r->allow)) {
            best = (int)r->prefix;
            allowed = r->allow;
        }
    }
    return allowed;
}

void access_settings_free(struct access_settings *a)
{
    free(a->rules);
    if (a->auth != NULL) {
        free(a->auth->realm);
        free(a->auth->users_path);
        for (size_t i = 0; i < a->auth->user_count; i++) {
            free(a->auth->users[i].name);
            free(a->auth->users[i].hash);
        }
        free(a->auth->users);
        free(a->auth);
    }
    memset(a, 0, sizeof *a);
}
