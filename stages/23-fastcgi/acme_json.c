/* acme_json.c -- reading the CA's JSON and writing the client's, with Jansson. */
#define _GNU_SOURCE /* asprintf, timegm */
#include "acme_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 256           /* Let's Encrypt's and pebble's are 43 characters */
#define TYPE_MAX 256            /* a challenge type or problem type */
#define DNS_NAME_MAX 253

/* The body as a JSON object, or NULL with *why set. */
static json_t *load_object(const char *body, size_t length, const char **why)
{
    json_t *root;

    if (body == NULL || length > ACME_JSON_BODY_MAX) {
        *why = "body too large";
        return NULL;
    }
    root = json_loadb(body, length, JSON_REJECT_DUPLICATES, NULL);
    if (root == NULL) {
        *why = "not JSON";
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *why = "not a JSON object";
        return NULL;
    }
    return root;
}

/* True if text (length bytes) is 1 to max bytes, none of them a control character (nor NUL). */
static bool plain_text(const char *text, size_t length, size_t max)
{
    if (length == 0 || length > max)
        return false;
    for (size_t i = 0; i < length; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            return false;
    return true;
}

/* The string member `key` of object if it is plain text of at most max bytes; else NULL
 * (*present tells an absent member from a bad one). */
static const char *member_text(json_t *object, const char *key, size_t max, bool *present)
{
    json_t *value = json_object_get(object, key);

    *present = value != NULL;
    if (!json_is_string(value) || !plain_text(json_string_value(value), json_string_length(value), max))
        return NULL;
    return json_string_value(value);
}

/* True if text is an https URL rsp can send a request to: "https://", a host, no space or control byte. */
static bool https_url(const char *text)
{
    size_t length = strlen(text);

    if (length <= 8 || strncmp(text, "https://", 8) != 0 || text[8] == '/' || text[8] == '?' || text[8] == '#')
        return false;
    for (size_t i = 0; i < length; i++)
        if ((unsigned char)text[i] <= 0x20 || text[i] == 0x7f)
            return false;
    return true;
}

/* *out = a copy of the https URL in object's member `key`, NULL if it is absent and not required.
 * 0, or -1 (missing, not a string, not an https URL, out of memory). */
static int take_url(json_t *object, const char *key, bool required, char **out)
{
    bool present;
    const char *text = member_text(object, key, ACME_JSON_URL_MAX, &present);

    *out = NULL;
    if (!present)
        return required ? -1 : 0;
    if (text == NULL || !https_url(text))
        return -1;
    *out = strdup(text);
    return *out != NULL ? 0 : -1;
}

/* *out = object's "status", ACME_STATUS_UNKNOWN for a value not in RFC 8555. 0, or -1 if missing. */
static int take_status(json_t *object, enum acme_status *out)
{
    static const char *const names[] = {
        [ACME_PENDING] = "pending", [ACME_READY] = "ready", [ACME_PROCESSING] = "processing",
        [ACME_VALID] = "valid", [ACME_INVALID] = "invalid", [ACME_EXPIRED] = "expired",
        [ACME_DEACTIVATED] = "deactivated", [ACME_REVOKED] = "revoked",
    };
    json_t *value = json_object_get(object, "status");

    if (!json_is_string(value))
        return -1;
    *out = ACME_STATUS_UNKNOWN;
    for (size_t i = ACME_PENDING; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(json_string_value(value), names[i]) == 0 && strlen(names[i]) == json_string_length(value))
            *out = (enum acme_status)i;
    return 0;
}

/* A copy of text (length bytes) fit for the log: control bytes as '?', cut at ACME_JSON_DETAIL_MAX
 * bytes (on a UTF-8 character boundary). NULL if out of memory. */
static char *log_copy(const char *text, size_t length)
{
    char *copy;

    if (length > ACME_JSON_DETAIL_MAX) {
        length = ACME_JSON_DETAIL_MAX;
        while (length > 0 && ((unsigned char)text[length] & 0xc0) == 0x80)
            length--;       /* text[length] continues a character: cut before that character */
    }
    copy = malloc(length + 1);
    if (copy == NULL)
        return NULL;
    for (size_t i = 0; i < length; i++)
        copy[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    copy[length] = '\0';
    return copy;
}

/* *out = the log copy of object's string member "detail", NULL if absent. 0, or -1 (not a string,
 * out of memory). */
static int take_detail(json_t *object, char **out)
{
    json_t *value = json_object_get(object, "detail");

    *out = NULL;
    if (value == NULL)
        return 0;
    if (!json_is_string(value))
        return -1;
    *out = log_copy(json_string_value(value), json_string_length(value));
    return *out != NULL ? 0 : -1;
}

/* *out = the detail of object's member "error" (a problem document), NULL if there is none. 0 or -1. */
static int take_error(json_t *object, char **out)
{
    json_t *error = json_object_get(object, "error");

    *out = NULL;
    if (error == NULL)
        return 0;
    if (!json_is_object(error))
        return -1;
    return take_detail(error, out);
}

int acme_directory_parse(const char *body, size_t length, struct acme_directory *out, const char **why)
{
    json_t *root = load_object(body, length, why), *meta;

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return -1;
    *why = "directory: newNonce, newAccount or newOrder missing or not an https URL";
    if (take_url(root, "newNonce", true, &out->new_nonce) != 0 ||
        take_url(root, "newAccount", true, &out->new_account) != 0 ||
        take_url(root, "newOrder", true, &out->new_order) != 0)
        goto fail;
    *why = "directory: renewalInfo not an https URL";
    if (take_url(root, "renewalInfo", false, &out->renewal_info) != 0)
        goto fail;
    meta = json_object_get(root, "meta");
    *why = "directory: meta not an object";
    if (meta != NULL && !json_is_object(meta))
        goto fail;
    if (meta != NULL) {
        bool present;
        const char *terms = member_text(meta, "termsOfService", ACME_JSON_URL_MAX, &present);
        *why = "directory: meta.termsOfService not a string";
        if (present && terms == NULL)
            goto fail;
        *why = "out of memory";
        if (terms != NULL && (out->terms_of_service = strdup(terms)) == NULL)
            goto fail;
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    acme_directory_free(out);
    return -1;
}

void acme_directory_free(struct acme_directory *directory)
{
    free(directory->new_nonce);
    free(directory->new_account);
    free(directory->new_order);
    free(directory->renewal_info);
    free(directory->terms_of_service);
    memset(directory, 0, sizeof *directory);
}

/* out->authorizations = the order's "authorizations" URLs. 0, or -1 with *why. */
static int order_authorizations(json_t *root, struct acme_order *out, const char **why)
{
    json_t *list = json_object_get(root, "authorizations");
    size_t count;

    *why = "order: authorizations missing or not an array";
    if (!json_is_array(list))
        return -1;
    count = json_array_size(list);
    *why = "order: more than 100 authorizations";
    if (count > ACME_JSON_ITEMS_MAX)
        return -1;
    *why = "out of memory";
    if (count > 0 && (out->authorizations = calloc(count, sizeof *out->authorizations)) == NULL)
        return -1;
    *why = "order: an authorization is not an https URL";
    for (size_t i = 0; i < count; i++) {
        json_t *url = json_array_get(list, i);
        if (!json_is_string(url) || !plain_text(json_string_value(url), json_string_length(url), ACME_JSON_URL_MAX) ||
            !https_url(json_string_value(url)))
            return -1;
        out->authorizations[i] = strdup(json_string_value(url));
        if (out->authorizations[i] == NULL)
            return -1;
        out->authorization_count = i + 1;
    }
    return 0;
}

int acme_order_parse(const char *body, size_t length, struct acme_order *out, const char **why)
{
    json_t *root = load_object(body, length, why);

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return -1;
    *why = "order: status missing or not a string";
    if (take_status(root, &out->status) != 0 || order_authorizations(root, out, why) != 0)
        goto fail;
    *why = "order: finalize missing or not an https URL";
    if (take_url(root, "finalize", true, &out->finalize) != 0)
        goto fail;
    *why = "order: certificate not an https URL";
    if (take_url(root, "certificate", false, &out->certificate) != 0)
        goto fail;
    *why = "order: valid without a certificate URL";
    if (out->status == ACME_VALID && out->certificate == NULL)
        goto fail;
    *why = "order: error not a problem document";
    if (take_error(root, &out->error_detail) != 0)
        goto fail;
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    acme_order_free(out);
    return -1;
}

void acme_order_free(struct acme_order *order)
{
    for (size_t i = 0; i < order->authorization_count; i++)
        free(order->authorizations[i]);
    free(order->authorizations);
    free(order->finalize);
    free(order->certificate);
    free(order->error_detail);
    memset(order, 0, sizeof *order);
}

/* True if text is a challenge token (RFC 8555 8.1): base64url characters only, so it is safe in a file
 * name and a URL path. */
static bool token_text(const char *text, size_t length)
{
    if (length == 0 || length > TOKEN_MAX)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* True if text is a DNS name as an identifier holds it: letters, digits, '-' and '.', at most 253. */
static bool dns_text(const char *text, size_t length)
{
    if (length == 0 || length > DNS_NAME_MAX || text[0] == '.')
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* *out = the challenge object. 0, or -1 with *why (out then holds what to free). */
static int challenge_parse(json_t *object, struct acme_challenge *out, const char **why)
{
    bool present;
    const char *type, *token;
    json_t *token_value;

    *why = "challenge: not an object";
    if (!json_is_object(object))
        return -1;
    type = member_text(object, "type", TYPE_MAX, &present);
    *why = "challenge: type missing or not a string";
    if (type == NULL || (out->type = strdup(type)) == NULL)
        return -1;
    *why = "challenge: url missing or not an https URL";
    if (take_url(object, "url", true, &out->url) != 0)
        return -1;
    *why = "challenge: status missing or not a string";
    if (take_status(object, &out->status) != 0)
        return -1;
    token_value = json_object_get(object, "token");
    token = json_string_value(token_value);
    *why = "challenge: token missing or not base64url";
    /* A type the client does not know may have no token. */
    if (token_value != NULL || strcmp(type, "http-01") == 0 || strcmp(type, "dns-01") == 0 ||
        strcmp(type, "tls-alpn-01") == 0) {
        if (token == NULL || !token_text(token, json_string_length(token_value)) ||
            (out->token = strdup(token)) == NULL)
            return -1;
    }
    *why = "challenge: error not a problem document";
    return take_error(object, &out->error_detail);
}

/* out->identifier and wildcard, from the authorization's "identifier" and "wildcard". 0, or -1 with *why. */
static int authorization_identifier(json_t *root, struct acme_authorization *out, const char **why)
{
    json_t *identifier = json_object_get(root, "identifier"), *type, *value, *wildcard;

    *why = "authorization: identifier missing or not a DNS name";
    if (!json_is_object(identifier))
        return -1;
    type = json_object_get(identifier, "type");
    value = json_object_get(identifier, "value");
    if (!json_is_string(type) || strcmp(json_string_value(type), "dns") != 0 || json_string_length(type) != 3 ||
        !json_is_string(value) || !dns_text(json_string_value(value), json_string_length(value)))
        return -1;
    wildcard = json_object_get(root, "wildcard");
    *why = "authorization: wildcard not a boolean";
    if (wildcard != NULL && !json_is_boolean(wildcard))
        return -1;
    out->wildcard = json_is_true(wildcard);
    *why = "out of memory";
    out->identifier = strdup(json_string_value(value));
    return out->identifier != NULL ? 0 : -1;
}

int acme_authorization_parse(const char *body, size_t length, struct acme_authorization *out, const char **why)
{
    json_t *root = load_object(body, length, why), *list;
    size_t count;

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return -1;
    *why = "authorization: status missing or not a string";
    if (take_status(root, &out->status) != 0 || authorization_identifier(root, out, why) != 0)
        goto fail;
    list = json_object_get(root, "challenges");
    *why = "authorization: challenges missing or not an array";
    if (!json_is_array(list))
        goto fail;
    count = json_array_size(list);
    *why = "authorization: more than 100 challenges";
    if (count > ACME_JSON_ITEMS_MAX)
        goto fail;
    *why = "out of memory";
    if (count > 0 && (out->challenges = calloc(count, sizeof *out->challenges)) == NULL)
        goto fail;
    for (size_t i = 0; i < count; i++) {
        out->challenge_count = i + 1;   /* so that acme_authorization_free frees a half-made one */
        if (challenge_parse(json_array_get(list, i), &out->challenges[i], why) != 0)
            goto fail;
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    acme_authorization_free(out);
    return -1;
}

void acme_authorization_free(struct acme_authorization *authorization)
{
    for (size_t i = 0; i < authorization->challenge_count; i++) {
        struct acme_challenge *challenge = &authorization->challenges[i];
        free(challenge->type);
        free(challenge->url);
        free(challenge->token);
        free(challenge->error_detail);
    }
    free(authorization->challenges);
    free(authorization->identifier);
    memset(authorization, 0, sizeof *authorization);
}

int acme_problem_parse(const char *body, size_t length, struct acme_problem *out, const char **why)
{
    json_t *root = load_object(body, length, why);
    const char *type;
    bool present;

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return -1;
    type = member_text(root, "type", TYPE_MAX, &present);
    *why = "problem: type not a string";
    if (present && type == NULL)
        goto fail;
    *why = "out of memory";
    if ((out->type = strdup(present ? type : "about:blank")) == NULL)
        goto fail;
    *why = "problem: detail not a string";
    if (take_detail(root, &out->detail) != 0)
        goto fail;
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    acme_problem_free(out);
    return -1;
}

void acme_problem_free(struct acme_problem *problem)
{
    free(problem->type);
    free(problem->detail);
    memset(problem, 0, sizeof *problem);
}

/* A reader of dates: the text left is [at, end). */
struct cursor { const char *at, *end; };

/* Reads exactly `digits` decimal digits into *out. */
static bool read_number(struct cursor *c, int digits, int *out)
{
    *out = 0;
    if (c->end - c->at < digits)
        return false;
    for (int i = 0; i < digits; i++, c->at++) {
        if (*c->at < '0' || *c->at > '9')
            return false;
        *out = *out * 10 + (*c->at - '0');
    }
    return true;
}

/* Reads the literal text if it comes next. */
static bool read_literal(struct cursor *c, const char *text)
{
    size_t length = strlen(text);

    if ((size_t)(c->end - c->at) < length || memcmp(c->at, text, length) != 0)
        return false;
    c->at += length;
    return true;
}

/* Reads one of the characters in `set`. */
static bool read_one_of(struct cursor *c, const char *set)
{
    if (c->at == c->end || strchr(set, *c->at) == NULL || *c->at == '\0')
        return false;
    c->at++;
    return true;
}

/* True if the date exists (the proleptic Gregorian calendar), the time is within a day (second 60: a leap
 * second), and *out is its time_t (UTC). */
static bool date_time(int year, int month, int day, int hour, int minute, int second, time_t *out)
{
    static const int days[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    struct tm tm;

    if (month < 1 || month > 12 || day < 1 || day > days[month - 1] || (month == 2 && day == 29 && !leap) ||
        hour > 23 || minute > 59 || second > 60)
        return false;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    *out = timegm(&tm);
    return true;
}

/* An RFC 3339 date-time (text, length bytes) as a time_t. 0, or -1. */
static int rfc3339(const char *text, size_t length, time_t *out)
{
    struct cursor c = { text, text + length };
    int year, month, day, hour, minute, second, offset_hours = 0, offset_minutes = 0, sign = 0;

    if (!read_number(&c, 4, &year) || !read_literal(&c, "-") || !read_number(&c, 2, &month) ||
        !read_literal(&c, "-") || !read_number(&c, 2, &day) || !read_one_of(&c, "Tt") ||
        !read_number(&c, 2, &hour) || !read_literal(&c, ":") || !read_number(&c, 2, &minute) ||
        !read_literal(&c, ":") || !read_number(&c, 2, &second))
        return -1;
    if (read_literal(&c, ".")) {        /* a fraction of a second, not kept */
        int digit;
        if (!read_number(&c, 1, &digit))
            return -1;
        while (read_number(&c, 1, &digit))
            ;
    }
    if (c.at < c.end && (*c.at == '+' || *c.at == '-')) {
        sign = *c.at++ == '+' ? 1 : -1;
        if (!read_number(&c, 2, &offset_hours) || !read_literal(&c, ":") || !read_number(&c, 2, &offset_minutes) ||
            offset_hours > 23 || offset_minutes > 59)
            return -1;
    } else if (!read_one_of(&c, "Zz"))
        return -1;
    if (c.at != c.end || !date_time(year, month, day, hour, minute, second, out))
        return -1;
    *out -= sign * (offset_hours * 3600 + offset_minutes * 60);
    return 0;
}

/* *out = the RFC 3339 time in window's member `key`. 0 or -1. */
static int take_time(json_t *window, const char *key, time_t *out)
{
    json_t *value = json_object_get(window, key);

    if (!json_is_string(value))
        return -1;
    return rfc3339(json_string_value(value), json_string_length(value), out);
}

int acme_renewal_info_parse(const char *body, size_t length, struct acme_renewal_info *out, const char **why)
{
    json_t *root = load_object(body, length, why), *window;
    int result = -1;

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return -1;
    window = json_object_get(root, "suggestedWindow");
    *why = "renewalInfo: suggestedWindow missing or not an object";
    if (json_is_object(window)) {
        *why = "renewalInfo: start or end missing or not an RFC 3339 time";
        if (take_time(window, "start", &out->start) == 0 && take_time(window, "end", &out->end) == 0) {
            *why = "renewalInfo: end not after start";
            if (out->end > out->start)
                result = 0;
        }
    }
    json_decref(root);
    if (result != 0)
        memset(out, 0, sizeof *out);
    return result;
}

/* object as compact JSON (NULL if object is NULL or out of memory); object is released. */
static char *dump(json_t *object)
{
    char *text = object != NULL ? json_dumps(object, JSON_COMPACT) : NULL;

    json_decref(object);
    return text;
}

char *acme_account_payload(const char *email)
{
    char *contact;
    json_t *object;

    if (email == NULL)
        return dump(json_pack("{s:b}", "termsOfServiceAgreed", 1));
    if (asprintf(&contact, "mailto:%s", email) < 0)
        return NULL;
    object = json_pack("{s:b, s:[s]}", "termsOfServiceAgreed", 1, "contact", contact);
    free(contact);
    return dump(object);
}

/* The newOrder object for names, or NULL. */
static json_t *order_object(const char *const *names, size_t count)
{
    json_t *identifiers = json_array();

    if (identifiers == NULL || names == NULL || count == 0) {
        json_decref(identifiers);
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        json_t *identifier = names[i] != NULL ? json_pack("{s:s, s:s}", "type", "dns", "value", names[i]) : NULL;
        if (json_array_append_new(identifiers, identifier) != 0) {
            json_decref(identifiers);
            return NULL;
        }
    }
    return json_pack("{s:o}", "identifiers", identifiers);  /* "o" takes identifiers, even on failure */
}

char *acme_order_payload(const char *const *names, size_t count)
{
    return dump(order_object(names, count));
}

char *acme_finalize_payload(const char *csr_base64url)
{
    if (csr_base64url == NULL)
        return NULL;
    return dump(json_pack("{s:s}", "csr", csr_base64url));
}

char *acme_renewal_order_payload(const char *const *names, size_t count, const char *replaces)
{
    json_t *object = order_object(names, count);

    if (object != NULL && (replaces == NULL || json_object_set_new(object, "replaces", json_string(replaces)) != 0)) {
        json_decref(object);
        return NULL;
    }
    return dump(object);
}

/* Reads an English day name ("Sun", or "Sunday" when long). */
static bool read_day_name(struct cursor *c, bool long_form)
{
    static const char *const days[] = { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                        "Saturday" };

    for (size_t i = 0; i < sizeof days / sizeof days[0]; i++) {
        char short_name[4];
        memcpy(short_name, days[i], 3);
        short_name[3] = '\0';
        if (read_literal(c, long_form ? days[i] : short_name))
            return true;
    }
    return false;
}

/* Reads a month name ("Jan") into *month, 1 to 12. */
static bool read_month(struct cursor *c, int *month)
{
    static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

    for (int i = 0; i < 12; i++)
        if (read_literal(c, months[i])) {
            *month = i + 1;
            return true;
        }
    return false;
}

/* Reads "HH:MM:SS". */
static bool read_clock(struct cursor *c, int *hour, int *minute, int *second)
{
    return read_number(c, 2, hour) && read_literal(c, ":") && read_number(c, 2, minute) &&
           read_literal(c, ":") && read_number(c, 2, second);
}

/* An HTTP-date (RFC 9110 5.6.7: IMF-fixdate, or the obsolete RFC 850 and asctime forms) as a
 * time_t. 0 or -1. now places a two-digit year. */
static int http_date(const char *text, size_t length, time_t now, time_t *out)
{
    struct cursor c = { text, text + length }, start = c;
    int year, month, day, hour, minute, second;

    /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    if (read_day_name(&c, false) && read_literal(&c, ", ") && read_number(&c, 2, &day) &&
        read_literal(&c, " ") && read_month(&c, &month) && read_literal(&c, " ") && read_number(&c, 4, &year) &&
        read_literal(&c, " ") && read_clock(&c, &hour, &minute, &second) && read_literal(&c, " GMT") &&
        c.at == c.end)
        return date_time(year, month, day, hour, minute, second, out) ? 0 : -1;
    /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT; a year more than 50 years ahead is in the past century. */
    c = start;
    if (read_day_name(&c, true) && read_literal(&c, ", ") && read_number(&c, 2, &day) &&
        read_literal(&c, "-") && read_month(&c, &month) && read_literal(&c, "-") && read_number(&c, 2, &year) &&
        read_literal(&c, " ") && read_clock(&c, &hour, &minute, &second) && read_literal(&c, " GMT") &&
        c.at == c.end) {
        struct tm today;
        if (gmtime_r(&now, &today) == NULL)
            return -1;
        year += (today.tm_year + 1900) / 100 * 100;
        if (year > today.tm_year + 1900 + 50)
            year -= 100;
        return date_time(year, month, day, hour, minute, second, out) ? 0 : -1;
    }
    /* asctime: Sun Nov  6 08:49:37 1994 */
    c = start;
    if (read_day_name(&c, false) && read_literal(&c, " ") && read_month(&c, &month) && read_literal(&c, " ")) {
        if (read_literal(&c, " ")) {
            if (!read_number(&c, 1, &day))
                return -1;
        } else if (!read_number(&c, 2, &day))
            return -1;
        if (read_literal(&c, " ") && read_clock(&c, &hour, &minute, &second) && read_literal(&c, " ") &&
            read_number(&c, 4, &year) && c.at == c.end)
            return date_time(year, month, day, hour, minute, second, out) ? 0 : -1;
    }
    return -1;
}

double acme_retry_after(const char *value, time_t now)
{
    const char *start, *end;
    time_t when;

    if (value == NULL)
        return -1;
    start = value;
    end = value + strlen(value);
    while (start < end && (*start == ' ' || *start == '\t'))
        start++;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (start == end)
        return -1;
    if (*start >= '0' && *start <= '9') {
        double seconds = 0;
        for (const char *p = start; p < end; p++) {
            if (*p < '0' || *p > '9')
                return -1;
            if (seconds < 1e15)     /* beyond any wait that makes sense; kept finite */
                seconds = seconds * 10 + (*p - '0');
        }
        return seconds;
    }
    if (http_date(start, (size_t)(end - start), now, &when) != 0)
        return -1;
    return when > now ? difftime(when, now) : 0;
}
