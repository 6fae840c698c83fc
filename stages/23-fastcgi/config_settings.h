/* config_settings.h -- rsp's top-level settings in one table: each one's
 * name, type, place in struct config, default and bounds. From it come the
 * defaults of a new config, the reading and checking of the scalar ones,
 * and the names behind the typo warnings. Private to the config_*.c files. */
#ifndef RSP_CONFIG_SETTINGS_H
#define RSP_CONFIG_SETTINGS_H

#include "config.h"

#include <lua.h>
#include <stddef.h>

/* What a setting's value is, and so how it is read and where it goes. */
enum setting_type {
    SETTING_OWN,        /* a table, an address...: read by code of its own,
                           named here for the typo warnings only */
    SETTING_SECONDS,    /* double: a number from min to max */
    SETTING_COUNT,      /* unsigned: a whole number from min to max */
    SETTING_BYTES,      /* size_t: a whole number of bytes from min to max */
    SETTING_SIZE,       /* uint64_t: bytes, a whole number or "64k", "1m", "1g" */
    SETTING_BUFFER,     /* size_t: as SETTING_SIZE (bytes held in memory) */
    SETTING_RATE,       /* double: bytes per second from min (0: no minimum) to max */
    SETTING_BOOLEAN,    /* bool */
    SETTING_TEXT,       /* char *: a non-empty string without zero bytes; absent: NULL */
    SETTING_CHOICE,     /* int: the index of one of choices (a string) */
    SETTING_DIRECTORY,  /* char *: the absolute path of a directory rsp can write
                           to; absent: fallback if it is one, else /tmp */
};

/* One top-level setting. */
struct setting {
    const char *name;
    enum setting_type type;
    size_t offset;              /* of its value in struct config */
    double fallback;            /* the default of a number, a boolean (1: true)
                                   or a choice (its index) */
    double min, max;            /* the bounds of a number, both included */
    const char *fallback_text;  /* SETTING_DIRECTORY's default */
    const char *const *choices; /* SETTING_CHOICE's names, NULL-terminated */
};

/* Every top-level setting, in the order the typo warnings try them;
 * config_setting_count of them. */
extern const struct setting config_settings[];
extern const size_t config_setting_count;

/* Gives config (zeroed) the defaults of the table's numbers, booleans and
 * choices. */
void config_settings_defaults(struct config *config);

/* Reads every setting of the table but the SETTING_OWN ones from the
 * globals into config, in the table's order; an absent one keeps its
 * default. Returns 0, or -1 after naming the first setting that is wrong. */
int config_read_settings(lua_State *L, const char *path, struct config *config);

/* A size (SETTING_SIZE's form, 0 to 2^50) on top of the stack into *out;
 * name names it in the message. Returns 0, or -1 after a config error. */
int config_read_size_value(lua_State *L, const char *path, const char *name, uint64_t *out);

#endif
