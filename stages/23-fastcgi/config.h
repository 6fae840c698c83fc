/* config.h -- rsp's settings, read from a Lua script. */
#ifndef RSP_CONFIG_H
#define RSP_CONFIG_H

#include "backend.h"
#include "http.h"
#include "reactor.h"
#include "request.h"
#include "route.h"
#include "router.h"
#include "settings.h"
#include "site_output.h"

struct access_log;
struct mime_table;

/* Running the process (chapters 10 and 11). */
struct operations {
    double shutdown_timeout;    /* seconds requests in flight get when rsp stops */
    char *access_log;           /* its path; NULL: no access log */
    int access_log_format;      /* enum access_format (access_log.h) */
    struct access_log *log;     /* access_log, open (apply_access_log); NULL: none */
    bool logging;               /* some log is open: that one or a site's */
    bool site_logs;             /* some site has its own access_log (or false) */
    char *user;                 /* drop to this user after binding; NULL: stay */
    char *pid_file;             /* the master's (or rsp alone's) pid goes there; NULL: none */
    double ticket_key_lifetime; /* seconds a session-ticket key encrypts (ticket_keys.h) */
};

/* Seeing and scaling (chapters 12 and 13). */
struct scaling {
    char *status_host;          /* the status listener's address; NULL: none */
    char status_port[6];
    bool status_public;         /* status_host may be other than loopback */
    unsigned workers;           /* processes serving clients; 1: rsp alone, no master */
    bool reuseport;             /* a listening socket per worker (SO_REUSEPORT) */
    bool splice;                /* bodies spliced, not copied (chapter 16) */
};

/* Buffering between slow clients and backends (chapter 17). */
struct buffering {
    bool request;               /* request bodies read whole before a backend is chosen */
    size_t request_size;        /* of a body, bytes kept in memory; the rest in a file */
    uint64_t max_body;          /* the largest request body accepted (413); 0: any */
    double body_min_rate;       /* bytes per second a body must average; 0: no minimum */
    char *temp_dir;             /* where temporary files are made */
    bool response;              /* responses read as fast as the backend sends */
    size_t response_size;       /* of a response, bytes queued in memory for a slow client */
    uint64_t max_temp_file;     /* of a response, bytes waiting on disk at most; 0: none */
};

/* HTTP/2 to clients (chapter 20). */
struct http2_settings {
    unsigned max_streams;       /* streams open at once per connection, advertised in
                                   SETTINGS_MAX_CONCURRENT_STREAMS */
};

struct tls_context;
struct cidr;

/* One certificate the ACME client keeps (chapter 19): the names it is for,
 * the first of which names its files in storage. */
struct acme_domain_set {
    char **names;               /* lower case DNS names */
    size_t count;
};

/* tls.acme (chapter 19): certificates ordered from an ACME CA. */
struct acme_settings {
    char *email;                /* the account's contact, or NULL */
    char *directory;            /* the CA's directory URL (https://) */
    char *ca_root;              /* a PEM file of extra roots for the directory, or NULL */
    char *storage;              /* the directory of keys, certificates and challenges */
    struct acme_domain_set *sets;
    size_t set_count;
    char challenges[2][12];     /* "http-01", "tls-alpn-01", in order; "" past the last */
};

/* HTTPS (chapters 14 and 15). */
struct tls_settings {
    struct tls_context *context; /* the certificates (tls.h); NULL: no `tls` */
    char *listen_host;          /* tls.listen's address; NULL: every address */
    char listen_port[6];
    bool proxy_protocol;        /* its clients send the PROXY protocol's header first */
    bool redirect_http;         /* plain HTTP gets a 301 (308) to https:// */
    bool http2;                 /* ALPN offers h2, then http/1.1 (chapter 20); false: http/1.1 only */
    char hsts_line[64];         /* "Strict-Transport-Security: max-age=N\r\n", or "" */
    char *acme_webroot;         /* NULL: ACME challenges are not served by rsp;
                                   with acme, its storage's "challenges" */
    struct acme_settings *acme; /* NULL: no tls.acme */
    char **certificate_paths;   /* tls.certificates' files: cert, key, cert, key...
                                   (2 × certificate_count; config_check_user) */
    size_t certificate_count;
};

/* A config is one generation of settings: loaded from the file at start
 * and at every reload, never changed after, and freed when the last of
 * its holders lets go (refs): the current-generation slot
 * (generation.c) and every relay serving a request that began under it. */
struct config {
    unsigned refs;
    struct reactor_deferred released; /* the end of the batch that dropped the last
                                         reference, from a request (generation_release) */
    unsigned generation;        /* 1 at start, one more per reload (generation.c) */
    char *listen_host;          /* NULL: every local address */
    char listen_port[6];        /* "1".."65535" */
    bool proxy_protocol;        /* listen's clients send the PROXY protocol's header first */
    struct cidr *trusted_proxies; /* whose PROXY header and X-Forwarded-For are believed */
    size_t trusted_proxy_count; /* 0: no trusted_proxies (any peer's PROXY header) */
    struct pool default_pool;   /* the default site; used if router.fallback */
    struct named_pool *pools;   /* pools = { NAME = {...} }, sorted by name */
    size_t pool_count;
    struct router router;       /* the sites, and the default one */
    struct http_limits limits;  /* request line and head sizes */
    struct request_policy policy; /* underscores in header names, encoded slashes */
    double route_time_limit;    /* seconds */
    struct timeouts timeouts;
    struct keepalive keepalive;
    struct health_settings health; /* top-level health_check: every pool's default */
    struct route_hook route;    /* route.L == NULL: no route function */
    struct operations operations;
    struct scaling scaling;
    struct tls_settings tls;
    struct buffering buffering;
    struct http2_settings http2;
    struct site_output output;  /* the top level's compress, headers, error_pages, limit_req */
    unsigned limit_conn;        /* open connections per client address; 0: no limit (limit.h) */
    struct access_settings access; /* the top level's allow, deny, basic_auth (its
                                      max_body_size: buffering.max_body) */
    struct mime_table *mime;    /* extension -> Content-Type (/etc/mime.types and
                                   built-ins), read once per generation */
};

/* Runs the Lua script at path and reads these globals from it:
 *   listen    = 8000 | "8000" | "127.0.0.1:8000" | "[::1]:8000"
 *   backends  = { "HOST:PORT", ... }   the default site (1 to 64 entries);
 *                                      optional if there are sites or route
 *   balance   = "round_robin" | "least_conn"   for the default site
 *   pools     = { NAME = { backends = {...}, balance = "..." }, ... }   optional
 *   sites     = { ["www.example.com"] = { backends = {...}, balance = "..." },
 *                 ["*.example.com"] = { pool = "NAME" } }   optional; a site
 *               may have its own access_log (or false: none) and
 *               access_log_format, which replace the top-level ones
 *   route     = function (req) ... end   optional: chooses per request
 *   route_time_limit = seconds route may run per request (default 0.1)
 *   down_time = seconds a failed backend is skipped (default 5)
 *   max_request_line = 8192, max_request_head = 32768   (bytes)
 *   allow_underscores_in_headers = false   forward header names with '_'
 *   allow_encoded_slashes = false   let %2F, %5C and '\' through in paths (else 400)
 *   connect_timeout = 5, header_timeout = 10, body_timeout = 30,
 *   response_timeout = 60, idle_timeout = 300   (seconds, fractions allowed)
 *   keepalive_timeout = 75 (seconds; 0: one request per client connection),
 *   keepalive_requests = 1000, backend_keepalive = 32 (idle connections
 *   always kept per backend, the floor: as many as were in use at once
 *   lately are kept too, up to 1024; 0: none), backend_idle_timeout = 30
 *   (seconds)
 *   shutdown_timeout = 10 (seconds requests in flight get when rsp stops)
 *   access_log = "/var/log/rsp/access.log" | "stderr" (or "-") (off without it),
 *   access_log_format = "combined" | "timed" (adds request time and backend)
 *                       | "vhost_combined" | "json",
 *   user = "www-data"   started as root: drop to this user once listening
 *   ticket_key_lifetime = 43200 (seconds a TLS session-ticket key makes
 *               tickets; the one before it still decrypts: a ticket lives
 *               at most twice this)
 *   status_listen = "127.0.0.1:9090" (off without it), status_public = false
 *               (true: status_listen may be other than a loopback address)
 *   workers = 1 | N (up to 64) | "auto" (one per CPU); reuseport = false
 *   splice = true   response bodies go from backend to client through a
 *               pipe, never through rsp's memory, and files by sendfile(2)
 *               (false: copied)
 *   tls = { listen = 443 | "ADDRESS:443",
 *           certificates = { { cert = "fullchain.pem", key = "privkey.pem" }, ... },
 *           redirect_http = false, hsts = 0, http2 = true }   HTTPS (off
 *               without it); SNI picks the certificate by name, the first
 *               is the default; http2: ALPN offers h2, then http/1.1
 *               (false: http/1.1 only)
 *           tls.acme = { agree_to_terms = true, email, directory, ca_root,
 *               storage = "/var/lib/rsp/acme", domains = { ... },
 *               challenges = { "http-01", "tls-alpn-01" } }   certificates
 *               ordered and renewed by rsp itself; tls.certificates optional
 *   acme_webroot = "/var/www/acme"   serve /.well-known/acme-challenge/TOKEN
 *               from there, on plain HTTP (off without it)
 *   request_buffering = true   request bodies are read whole before a backend
 *               is chosen (false: streamed as they come); request_buffer_size =
 *               65536 bytes of a body kept in memory, the rest in a temporary
 *               file; max_body_size = 1048576 (413 beyond; 0: no limit; per
 *               site and pool too: access_rules.h);
 *               body_min_rate = 0 bytes per second a body must average (408)
 *   response_buffering = true   responses read as fast as the backend sends:
 *               response_buffer_size = 262144 bytes in memory, then up to
 *               max_temp_file_size = 1073741824 on disk (0: none)
 *   temp_dir = "/var/lib/rsp/tmp" (if it exists, else "/tmp")
 *   http2_max_streams = 128   HTTP/2 streams open at once on one client
 *               connection (1 to 1024)
 *   health_check = { path = "/", interval = 2, timeout = 1, rise = 2, fall = 3 }
 *               active checks for every pool and site (off without it); a pool
 *               or site may have its own health_check, or false
 *   root = "/srv/www"   the default site serves the files of this directory
 *               (instead of backends); a named pool or a site may have its
 *               own root instead of backends (never both)
 *   compress = false | true | { types = { "text/html", "application/json" },
 *               min_length = 256 }   responses compressed (br, zstd, gzip)
 *               for clients that accept it; true: the default types; a
 *               subtype may be an asterisk, alone or before "+json"
 *   headers = { ["X-Frame-Options"] = "DENY", Server = false }   response
 *               headers set (replacing any of that name) or removed
 *   error_pages = { [404] = "/srv/www/404.html", backends = false }   files
 *               read at load (up to 1 MiB) sent for rsp's own answers with
 *               those statuses; backends = true: for backends' too
 *               compress, headers and error_pages: at the top level, on a
 *               pool and on a site; a site's compress and error_pages
 *               replace its pool's, which replace the top level's; headers
 *               merge by name
 *   allow = { "10.0.0.0/8", "2001:db8::/32" }, deny = { "10.1.2.3", "all" }
 *               (403; the longest matching prefix decides, a tie denies;
 *               with allow set, a client no rule matches is refused),
 *   basic_auth = { realm = "private", users = "/etc/rsp/htpasswd",
 *               forward = false }   (401; bcrypt, sha512crypt, yescrypt
 *               hashes; the file re-read on reload): at the top level, on a
 *               pool and on a site, each taken whole from the site, else
 *               the pool, else the top level (access_rules.h)
 * At least one of backends, root, sites and route must be there. Backend names
 * are resolved here, once. With a route function the Lua state stays
 * alive in config->route. On any problem prints one line
 * naming the file and the setting to stderr and returns -1; otherwise fills
 * *config and returns 0. */
int config_load(const char *path, struct config *config);

/* config_load of text, the contents path had when it was read: messages
 * name path as they would have. */
int config_load_text(const char *path, const char *text, size_t length, struct config *config);

/* config_load into a new heap-allocated config, with one reference.
 * NULL on any problem (the message is printed). */
struct config *config_open(const char *path);

/* config_open of text, the contents of path (config_load_text). */
struct config *config_open_text(const char *path, const char *text, size_t length);

/* Reads the whole file at path into a new buffer (*text, NUL-terminated,
 * *length bytes without the NUL; free it). Returns 0, or -1 after saying
 * why, as a config error does (config_text.c). */
int config_read_file(const char *path, char **text, size_t *length);

/* The text of the config the master loaded last, handed to its workers
 * through shared memory (config_text.c): so that every worker loads the
 * very bytes the master checked, even if the file changed since. */
int config_share_init(void);             /* before the first fork; 0 or -1 */
int config_share_put(const char *path, const char *text, size_t length); /* 0, or -1 if too big */
int config_share_take(char **text, size_t *length); /* a copy: free it; 0, or -1 */
void config_share_close(void);

/* Started as root with `user` set: checks that this user can use every
 * file the config names (certificates, keys, tls.acme.ca_root; the
 * directories of access_log and the sites' own, temp_dir, acme_webroot,
 * tls.acme.storage),
 * trying each in a child process that becomes the user, as rsp does
 * later for good. Prints "rsp: PATH: setting 'S': user U cannot ..." for
 * each it cannot, and a warning if the user cannot read the config file
 * itself (reloads read it as the user). Returns 0 (also when not root
 * or without `user`: nothing to check), or -1 (config_check_user.c). */
int config_check_user(const char *path, const struct config *config);

/* One more reference to c; returns c. */
struct config *config_hold(struct config *c);

/* Drops a reference; the last frees c (and releases its backends). */
void config_release(struct config *c);

/* The pools of the config, one by one for i = 0, 1, ...: the default
 * site's, the named pools, and the sites' own; NULL past the last. */
struct pool *config_pool_at(struct config *config, size_t i);

/* Frees what config_read_tls allocated (config_tls.c). */
void config_free_tls(struct tls_settings *s);

/* Frees what config_load allocated. */
void config_free(struct config *config);

#endif
