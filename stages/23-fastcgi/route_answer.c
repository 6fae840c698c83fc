/* route_answer.c -- writing out a response table returned by route().
 *
 * The script is trusted to decide, not to write HTTP: whatever it puts in
 * a header goes through the checks here first. A value with a CR or LF in
 * it would let a request smuggle headers of its choosing (or a whole second
 * response) into our answer, so it is refused, not cleaned up. The framing
 * headers are ours alone. */
#include "route_answer.h"

#include "reply.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Appends, or raises "out of memory". */
static void append(lua_State *L, struct buffer *out, const char *data, size_t length)
{
    if (buffer_append(out, data, length) == -1)
        luaL_error(L, "out of memory");
}

#define APPEND_LITERAL(L, out, text) append(L, out, text, sizeof text - 1)

bool route_answer_is_token(const char *s, size_t length)
{
    if (length == 0)
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL)))
            return false;
    }
    return true;
}

bool route_answer_is_field_value(const char *s, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* Appends "name: value\r\n" for the string or number at stack index v. */
static void append_header(lua_State *L, struct buffer *out, const char *name, int v)
{
    size_t name_length = strlen(name), length;
    const char *value;

    if (lua_type(L, v) != LUA_TSTRING && lua_type(L, v) != LUA_TNUMBER)
        luaL_error(L, "route's response: header '%s' must be a string, a number or a list of "
                      "strings, not a %s", name, luaL_typename(L, v));
    lua_pushvalue(L, v); /* a copy, so that a number is turned into a string there */
    value = lua_tolstring(L, -1, &length);
    if (!route_answer_is_field_value(value, length))
        luaL_error(L, "route's response: header '%s' has a control character (CR, LF, NUL...) "
                      "in its value", name);
    append(L, out, name, name_length);
    APPEND_LITERAL(L, out, ": ");
    append(L, out, value, length);
    APPEND_LITERAL(L, out, "\r\n");
    lua_pop(L, 1);
}

/* Appends the headers of the table at index t; returns true if one of them
 * is Content-Type. `has_location`: a Location header would be a second one. */
static bool append_headers(lua_State *L, int t, bool has_location, struct buffer *out)
{
    bool content_type = false;

    for (lua_pushnil(L); lua_next(L, t) != 0; lua_pop(L, 1)) {
        size_t length;
        const char *name;

        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "route's response: header names must be strings, not a %s",
                       luaL_typename(L, -2));
        name = lua_tolstring(L, -2, &length);
        if (!route_answer_is_token(name, length))
            luaL_error(L, "route's response: \"%s\" is not a valid header name", name);
        if (strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0 ||
            strcasecmp(name, "connection") == 0)
            luaL_error(L, "route's response: rsp sets the '%s' header itself", name);
        if (has_location && strcasecmp(name, "location") == 0)
            luaL_error(L, "route's response: both 'location' and a '%s' header", name);
        content_type |= strcasecmp(name, "content-type") == 0;
        if (lua_type(L, -1) == LUA_TTABLE) {
            size_t count = lua_objlen(L, -1);
            /* An empty list would send nothing, and for Content-Type
             * would also suppress our default: say what was meant. */
            if (count == 0)
                luaL_error(L, "route's response: header '%s' has an empty list of values", name);
            for (size_t i = 1; i <= count; i++) {
                lua_rawgeti(L, -1, (int)i);
                append_header(L, out, name, lua_gettop(L));
                lua_pop(L, 1);
            }
        } else {
            append_header(L, out, name, lua_gettop(L));
        }
    }
    return content_type;
}

/* Pushes field `name` of the table at t, without metamethods. */
static int raw_field(lua_State *L, int t, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, t);
    return lua_gettop(L);
}

void route_answer_write(lua_State *L, int index, bool head_only, const char *connection,
                        struct buffer *out)
{
    int t = index > 0 ? index : lua_gettop(L) + index + 1;
    int status_at = raw_field(L, t, "status"), location_at = raw_field(L, t, "location"),
        headers_at = raw_field(L, t, "headers"), body_at = raw_field(L, t, "body");
    char page[1024];
    struct buffer response = BUFFER_INIT;
    const char *body = NULL;
    size_t body_length = 0;
    bool content_type = false, no_body;
    lua_Number number = lua_tonumber(L, status_at);
    int status;

    /* Range first: converting 1e300 or NaN to int is undefined behaviour. */
    if (lua_type(L, status_at) != LUA_TNUMBER || !(number >= 200 && number <= 599) ||
        number != (lua_Number)(int)number)
        luaL_error(L, "route's response: 'status' must be a whole number from 200 to 599");
    status = (int)number;
    /* 204 and 304 never have a body; 205 must not have one (RFC 9110,
     * section 15.3.6), though unlike those two it says so with a
     * Content-Length of 0. */
    no_body = status == 204 || status == 205 || status == 304;
    if (!lua_isnil(L, body_at) && lua_type(L, body_at) != LUA_TSTRING)
        luaL_error(L, "route's response: 'body' must be a string, not a %s", luaL_typename(L, body_at));
    if (!lua_isnil(L, body_at) && no_body)
        luaL_error(L, "route's response: a %d response has no body", status);
    if (!lua_isnil(L, location_at) && lua_type(L, location_at) != LUA_TSTRING)
        luaL_error(L, "route's response: 'location' must be a string, not a %s",
                   luaL_typename(L, location_at));
    if (!lua_isnil(L, headers_at) && lua_type(L, headers_at) != LUA_TTABLE)
        luaL_error(L, "route's response: 'headers' must be a table, not a %s",
                   luaL_typename(L, headers_at));

    if (!lua_isnil(L, location_at))
        append_header(L, out, "Location", location_at);
    if (!lua_isnil(L, headers_at))
        content_type = append_headers(L, headers_at, !lua_isnil(L, location_at), out);

    if (lua_type(L, body_at) == LUA_TSTRING) {
        body = lua_tolstring(L, body_at, &body_length);
        if (!content_type)
            APPEND_LITERAL(L, out, "Content-Type: text/plain; charset=utf-8\r\n");
    } else if (status >= 300 && !no_body) {
        body_length = reply_page(page, sizeof page, status, NULL);
        body = page;
        if (!content_type)
            APPEND_LITERAL(L, out, "Content-Type: text/html; charset=utf-8\r\n");
    } else if (status == 205 || !no_body) {
        body = ""; /* no body, but a Content-Length of 0 says so */
    }
    /* out holds the header lines so far (the caller frees it if an error
     * is raised); the whole response replaces them. */
    struct reply r = { status, buffer_bytes(out), buffer_length(out), body, body_length };
    if (reply_append(&response, &r, head_only, connection) == -1) {
        buffer_free(&response);
        luaL_error(L, "out of memory");
    }
    buffer_free(out);
    *out = response;
}
