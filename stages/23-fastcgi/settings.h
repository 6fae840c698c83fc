/* settings.h -- settings that the layers below the config read, in
 * structs of their own so that those layers need not know the config
 * (config.h holds one of each, read by config.c). Depends on nothing. */
#ifndef RSP_SETTINGS_H
#define RSP_SETTINGS_H

/* How long each wait may last, in seconds (relay.c). */
struct timeouts {
    double connect;             /* for a backend to accept the connection */
    double header;              /* for a client to send its whole request head */
    double body;                /* between two reads of a request body */
    double response;            /* for a backend to begin its response */
    double idle;                /* with no byte either way */
};

/* Keeping connections open for more requests (chapter 09). */
struct keepalive {
    double timeout;             /* a client's silence between requests, seconds; 0: close */
    unsigned requests;          /* requests per client connection */
    unsigned backend_idle;      /* idle connections always kept per backend (more while
                                   more were in use lately: upstream.c); 0: none */
    double backend_idle_timeout; /* seconds an idle backend connection is kept */
};

#endif
