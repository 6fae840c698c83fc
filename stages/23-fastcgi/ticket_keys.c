/* ticket_keys.c -- rotating the session-ticket keys in shared memory, and
 * OpenSSL's callback that uses them (see ticket_keys.h). */
#include "ticket_keys.h"

#include "log.h"
#include "reactor.h"
#include "timer.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define KEYS 2                  /* keys[0] encrypts; keys[1], the one before, still decrypts */
#define WORDS 10                /* a key's 80 bytes as 64-bit words */

/* One key, as OpenSSL's callback wants it. */
struct ticket_key {
    unsigned char name[16];     /* sent in clear in the ticket: which key made it */
    unsigned char aes[32];      /* AES-256-CBC */
    unsigned char hmac[32];     /* HMAC-SHA256 */
};

_Static_assert(sizeof(struct ticket_key) == WORDS * sizeof(uint64_t), "a key is WORDS words");

/* The shared table. The keys are atomic words so that a reader racing the
 * writer reads stale or torn words (and tries again), never undefined
 * behaviour. */
struct shared_keys {
    _Atomic uint64_t sequence;  /* odd while the writer writes */
    _Atomic uint64_t words[KEYS][WORDS];
};

static struct shared_keys *shared;
static struct timer rotation;

/* Copies the shared keys into keys, consistent: both from one write. */
static void read_keys(struct ticket_key keys[KEYS])
{
    uint64_t words[KEYS][WORDS], before, after;

    do {
        before = atomic_load_explicit(&shared->sequence, memory_order_acquire);
        for (size_t k = 0; k < KEYS; k++)
            for (size_t w = 0; w < WORDS; w++)
                words[k][w] = atomic_load_explicit(&shared->words[k][w], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        after = atomic_load_explicit(&shared->sequence, memory_order_relaxed);
    } while ((before & 1) != 0 || before != after);
    memcpy(keys, words, sizeof words);
    OPENSSL_cleanse(words, sizeof words);
}

/* Makes a new current key; the current one becomes the previous one, and
 * the previous one is overwritten. Only one process calls this. Returns 0,
 * or -1 (the keys left as they were) if there are no random bytes. */
static int rotate(void)
{
    struct ticket_key fresh;
    uint64_t words[WORDS];
    uint64_t sequence = atomic_load_explicit(&shared->sequence, memory_order_relaxed);

    if (RAND_priv_bytes((unsigned char *)&fresh, sizeof fresh) != 1)
        return -1;
    memcpy(words, &fresh, sizeof words);
    atomic_store_explicit(&shared->sequence, sequence + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t w = 0; w < WORDS; w++) {
        atomic_store_explicit(&shared->words[1][w],
                              atomic_load_explicit(&shared->words[0][w], memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&shared->words[0][w], words[w], memory_order_relaxed);
    }
    atomic_store_explicit(&shared->sequence, sequence + 2, memory_order_release);
    OPENSSL_cleanse(&fresh, sizeof fresh);
    OPENSSL_cleanse(words, sizeof words);
    return 0;
}

int ticket_keys_init(void)
{
    void *p;

    if (shared != NULL)
        return 0;
    p = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        log_errno("mmap (%zu bytes of session-ticket keys)", sizeof *shared);
        return -1;
    }
    shared = p;
    /* Two fresh keys: the zeroed previous one must not decrypt anything. */
    if (rotate() == -1 || rotate() == -1) {
        log_msg("no random bytes for the session-ticket keys");
        ticket_keys_close();
        return -1;
    }
    return 0;
}

/* ticket_key_lifetime as the generation in service says (set_lifetime). */
static double lifetime_now;

/* Arms the next rotation, `lifetime` seconds from now. */
static int arm(double lifetime)
{
    if (timer_arm(&rotation, reactor_now() + lifetime) == -1) {
        log_msg("out of memory arming a timer: the session-ticket keys are not rotated");
        return -1;
    }
    return 0;
}

static void rotation_fired(struct timer *timer)
{
    (void)timer;
    if (rotate() == -1)
        log_msg("no random bytes for a new session-ticket key: the current one is kept");
    else
        log_msg("session-ticket key rotated");
    /* The lifetime in force now: a reload's counts from here. */
    arm(lifetime_now);
}

int ticket_keys_start(double lifetime)
{
    lifetime_now = lifetime;
    timer_init(&rotation, rotation_fired, NULL);
    return ticket_keys_init() == -1 ? -1 : arm(lifetime);
}

void ticket_keys_set_lifetime(double lifetime)
{
    lifetime_now = lifetime;
}

void ticket_keys_close(void)
{
    timer_disarm(&rotation);
    if (shared == NULL)
        return;
    /* Not wiped: other processes may still be using the keys. */
    if (munmap(shared, sizeof *shared) == -1)
        log_errno("munmap");
    shared = NULL;
}

/* OpenSSL's ticket callback (SSL_CTX_set_tlsext_ticket_key_evp_cb):
 * encrypting, the current key under its name and a random IV; decrypting,
 * the key the ticket names: 1 for the current one, 2 for the previous one
 * (resume, and send a ticket under the current key), 0 for one rsp no
 * longer has (a full handshake); -1 on an OpenSSL failure. */
static int ticket_key_callback(SSL *ssl, unsigned char name[16], unsigned char *iv,
                               EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int encrypt)
{
    struct ticket_key keys[KEYS];
    OSSL_PARAM params[3];
    size_t k = 0;
    int rc = -1;

    (void)ssl;
    if (shared == NULL)
        return 0; /* no keys made (cannot happen once a tls_context exists) */
    read_keys(keys);
    if (encrypt) {
        if (RAND_bytes(iv, EVP_CIPHER_iv_length(EVP_aes_256_cbc())) != 1)
            goto out;
        memcpy(name, keys[0].name, sizeof keys[0].name);
    } else {
        while (k < KEYS && memcmp(name, keys[k].name, sizeof keys[k].name) != 0)
            k++;
        if (k == KEYS) {
            rc = 0;
            goto out;
        }
    }
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, keys[k].hmac, sizeof keys[k].hmac);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    if (EVP_MAC_CTX_set_params(mac, params) != 1)
        goto out;
    if (encrypt ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, keys[k].aes, iv) != 1
                : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, keys[k].aes, iv) != 1)
        goto out;
    rc = k == 0 ? 1 : 2;
out:
    OPENSSL_cleanse(keys, sizeof keys);
    return rc;
}

int ticket_keys_use(SSL_CTX *ctx)
{
    return SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_callback) == 1;
}
