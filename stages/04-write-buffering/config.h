/* config.h -- rsp's settings, read from a Lua script. */
#ifndef RSP_CONFIG_H
#define RSP_CONFIG_H

struct config {
    char listen_port[6];     /* "1".."65535" */
    char *backend_address;   /* host name or IP address, malloc'd */
    char backend_port[6];
};

/* Runs the Lua script at path and reads the settings listenPort,
 * backendAddress and backendPort from the globals it leaves behind. On any
 * problem prints one line naming the file (and the setting, if it is a
 * setting's fault) to stderr and returns -1; otherwise fills *config and
 * returns 0. */
int config_load(const char *path, struct config *config);

/* Frees what config_load allocated. */
void config_free(struct config *config);

#endif
