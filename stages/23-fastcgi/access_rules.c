/* access_rules.c -- allow/deny by address and CIDR prefix (access_rules.h):
 * the policy, the longest matching entry deciding (cidr.c matches). */
#include "access_rules.h"

#include <stdlib.h>
#include <string.h>

bool access_rules_allow(const struct access_rule *rules, size_t count, bool has_allow, int family,
                        const unsigned char address[16])
{
    int best = -1;              /* the longest matching prefix so far */
    bool allowed = !has_allow;

    for (size_t i = 0; i < count; i++) {
        const struct access_rule *r = &rules[i];

        if (!cidr_contains(&r->prefix, family, address))
            continue;
        if ((int)r->prefix.bits > best || ((int)r->prefix.bits == best && !r->allow)) {
            best = (int)r->prefix.bits;
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
