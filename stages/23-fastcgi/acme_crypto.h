/* acme_crypto.h -- the cryptography of the ACME client (RFC 8555), on OpenSSL.
 *
 * Everything the client signs or checks, as pure functions: the account
 * and certificate keys (ECDSA P-256), base64url, the JWK thumbprint and
 * key authorization of a challenge, the JWS that wraps every request
 * (ES256: OpenSSL signs in DER, JWS wants the raw R||S), the CSR sent to
 * finalize, the tls-alpn-01 certificate (RFC 8737), and the facts the
 * client reads from a certificate it holds (validity, names, the RFC 9773
 * ARI certID). No I/O: the client's state machine calls these. Every
 * returned char * is malloc'd and NUL-terminated; the caller frees it. */
#ifndef RSP_ACME_CRYPTO_H
#define RSP_ACME_CRYPTO_H

#include <openssl/evp.h>
#include <stddef.h>
#include <time.h>

/* data (length bytes) in base64url, without padding; NULL if out of memory. */
char *acme_base64url(const void *data, size_t length);

/* A new ECDSA P-256 key, or NULL. */
EVP_PKEY *acme_key_new(void);

/* The private key in a PEM text (length bytes), if it is EC P-256 and not
 * encrypted, or NULL. */
EVP_PKEY *acme_key_parse(const char *pem, size_t length);

/* The private key as PEM (PKCS#8, unencrypted), *length set to its length, or NULL. */
char *acme_key_pem(EVP_PKEY *key, size_t *length);

/* The public key of key (EC P-256) as a JWK with its members in RFC 7638
 * order and no whitespace: {"crv":"P-256","kty":"EC","x":"...","y":"..."}; or NULL. */
char *acme_jwk(EVP_PKEY *key);

/* The RFC 7638 JWK thumbprint of key: base64url(SHA-256(acme_jwk(key))), or NULL. */
char *acme_thumbprint(EVP_PKEY *key);

/* A challenge's key authorization (RFC 8555 8.1): token "." thumbprint, or NULL. */
char *acme_key_authorization(const char *token, EVP_PKEY *account_key);

/* A JWS in flattened JSON serialization (RFC 8555 6.2, RFC 7515): protected header
 * {"alg":"ES256","jwk":{...}} when kid is NULL, else {"alg":"ES256","kid":kid}, plus "nonce" and "url";
 * "payload" is base64url(payload) ("" stays "": a POST-as-GET); "signature" the raw R||S (64 bytes, each
 * half left-padded to 32) made from OpenSSL's DER ECDSA signature. NULL on failure (a string not UTF-8). */
char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url, const char *payload);

/* A PKCS#10 CSR for names (subjectAltName DNS entries, CN = names[0]) signed by key: base64url(DER).
 * The CN is left out when names[0] is longer than 64 bytes (its ASN.1 limit). NULL on failure. */
char *acme_csr(EVP_PKEY *key, const char *const *names, size_t count);

/* RFC 8737 tls-alpn-01: a self-signed certificate for `name` (SAN dNSName = name) carrying the critical
 * acmeIdentifier extension (1.3.6.1.5.5.7.1.31) = DER OCTET STRING of SHA-256(key_authorization), valid a
 * week, with a new P-256 key; returns the certificate PEM followed by the key PEM, *length set; or NULL. */
char *acme_alpn_pem(const char *name, const char *key_authorization, size_t *length);

/* Facts about the first certificate of a PEM chain: validity, its DNS names (SAN), and its RFC 9773 ARI
 * certID: base64url(authorityKeyIdentifier keyIdentifier) "." base64url(serial number DER content octets).
 * Returns 0, or -1 if the PEM holds no certificate (or out of memory). names: malloc'd array of malloc'd
 * strings (SAN entries holding a byte outside printable ASCII are left out). ari_id NULL (and not an
 * error) when the certificate has no AKI. */
struct acme_cert_facts { time_t not_before, not_after; char **names; size_t name_count; char *ari_id; };
int acme_cert_facts(const char *pem, size_t length, struct acme_cert_facts *facts);

/* Frees what acme_cert_facts filled in and zeroes *facts. */
void acme_cert_facts_free(struct acme_cert_facts *facts);

/* True (1) if the PEM chain's first certificate holds key's public key; 0 if not or no certificate. */
int acme_chain_matches_key(const char *chain_pem, size_t chain_length, EVP_PKEY *key);

#endif
