/* version.h -- rsp's version: `rsp -v`, the status page, status.json. The
 * minor number is the tutorial's stage. */
#ifndef RSP_VERSION_H
#define RSP_VERSION_H

#define RSP_VERSION "0.23.0"

#endif
