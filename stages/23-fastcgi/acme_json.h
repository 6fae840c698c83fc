/* acme_json.h -- the ACME client's messages (RFC 8555), read and written with Jansson.
 *
 * What the CA sends is hostile input: each parser takes a whole response
 * body and either fills its struct completely or returns -1 with a short
 * reason in *why (a static string) and leaves nothing to free. Wrong types,
 * missing members, URLs that are not https, tokens outside the base64url
 * alphabet (a token becomes a file name), more than ACME_JSON_ITEMS_MAX
 * authorizations or challenges, a body over ACME_JSON_BODY_MAX: all -1.
 * Members the client does not use are ignored. Strings meant for the log
 * (error details) have their control characters replaced by '?' and are cut
 * at ACME_JSON_DETAIL_MAX bytes. The payload builders return compact JSON,
 * malloc'd (NULL if out of memory or a string is not UTF-8). */
#ifndef RSP_ACME_JSON_H
#define RSP_ACME_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define ACME_JSON_BODY_MAX (1024 * 1024)
#define ACME_JSON_ITEMS_MAX 100
#define ACME_JSON_URL_MAX 2048
#define ACME_JSON_DETAIL_MAX 512

/* An object's status; a status string the client does not know is ACME_STATUS_UNKNOWN. */
enum acme_status { ACME_STATUS_UNKNOWN, ACME_PENDING, ACME_READY, ACME_PROCESSING, ACME_VALID, ACME_INVALID,
                   ACME_EXPIRED, ACME_DEACTIVATED, ACME_REVOKED };

/* The directory (RFC 8555 7.1.1): the first three are https URLs; renewal_info (RFC 9773) is NULL when
 * not offered, terms_of_service (meta.termsOfService, any string: pebble's is a data: URL) when absent. */
struct acme_directory { char *new_nonce, *new_account, *new_order, *renewal_info, *terms_of_service; };

/* An order (RFC 8555 7.1.3): certificate is NULL until the order is valid (a valid order without one is
 * refused); error_detail is the detail of its "error" problem, or NULL. */
struct acme_order { enum acme_status status; char **authorizations; size_t authorization_count; char *finalize; char *certificate; char *error_detail; };

/* One challenge (RFC 8555 7.1.5, 8): token is NULL only for a type other than http-01, dns-01 and
 * tls-alpn-01 (which need one); error_detail as in an order. */
struct acme_challenge { char *type, *url, *token; enum acme_status status; char *error_detail; };

/* An authorization (RFC 8555 7.1.4): identifier is the DNS name (type "dns", never with "*."). */
struct acme_authorization { enum acme_status status; char *identifier; bool wildcard; struct acme_challenge *challenges; size_t challenge_count; };

/* A problem document (RFC 7807): type "about:blank" when absent; detail NULL when absent. */
struct acme_problem { char *type; char *detail; };              /* type e.g. "urn:ietf:params:acme:error:badNonce" */

/* RFC 9773 suggestedWindow, RFC 3339 times; end is after start. */
struct acme_renewal_info { time_t start, end; };

/* Each parser: 0 with *out filled (free it with the matching *_free), or -1 with *why set. */
int acme_directory_parse(const char *body, size_t length, struct acme_directory *out, const char **why);
int acme_order_parse(const char *body, size_t length, struct acme_order *out, const char **why);
int acme_authorization_parse(const char *body, size_t length, struct acme_authorization *out, const char **why);
int acme_problem_parse(const char *body, size_t length, struct acme_problem *out, const char **why);
int acme_renewal_info_parse(const char *body, size_t length, struct acme_renewal_info *out, const char **why);

/* Each frees what its parser filled in and zeroes the struct (a zeroed struct is fine too). */
void acme_directory_free(struct acme_directory *); void acme_order_free(struct acme_order *);
void acme_authorization_free(struct acme_authorization *); void acme_problem_free(struct acme_problem *);

/* The newAccount payload: {"termsOfServiceAgreed":true,"contact":["mailto:EMAIL"]}, no contact when
 * email is NULL. */
char *acme_account_payload(const char *email /* NULL: no contact */);
/* The newOrder payload: {"identifiers":[{"type":"dns","value":NAME},...]}. */
char *acme_order_payload(const char *const *names, size_t count);
/* The finalize payload: {"csr":CSR}. */
char *acme_finalize_payload(const char *csr_base64url);
/* The newOrder payload of a renewal: as acme_order_payload plus "replaces":ARI_ID (RFC 9773 5). */
char *acme_renewal_order_payload(const char *const *names, size_t count, const char *replaces);

/* Retry-After (RFC 9110 10.2.3): delay-seconds or an HTTP-date, as seconds from now (>= 0), or -1 if absent/invalid. */
double acme_retry_after(const char *value, time_t now);

#endif
