#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_acme.c: fuzz/corpus/acme/.

Each seed is one byte choosing the reader (0 directory, 1 order,
2 authorization, 3 problem, 4 renewalInfo, 5 Retry-After, 6 a PEM chain)
and then what a CA sends. The JSON bodies are pebble's (recorded from
pebble 2.x on loopback through a whole order: directory, account, order,
authorizations, finalize, certificate; pebble indents with three spaces),
Let's Encrypt's where pebble has none (renewalInfo, rateLimited), and
hostile variations. ./make-acme-seeds.py from fuzz/ rewrites them."""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
B = "https://127.0.0.1:14000"


def pebble(obj):
    return json.dumps(obj, indent=3).encode()


CHALLENGES = [
    {"type": "http-01", "url": B + "/chalZ/Z21I9d1fqdlPVx7r-TdTtzzKJRIlj5k0vpZ_Lz6-T1s",
     "token": "xcMnbtPaJ7RHRnUfW2-sMR1gpnmsPcDbY1yrUKYhLvM", "status": "pending"},
    {"type": "tls-alpn-01", "url": B + "/chalZ/5BVX3455aVZ__BayAGGiGGlA3WTnxjUtvpRcskJjABY",
     "token": "njudYPMEicYeZd7V5ecxhi-jIRqhMPeP1Wsabz4JPD8", "status": "pending"},
    {"type": "dns-01", "url": B + "/chalZ/1zdtFofN8VwCM91F79qUdzqQ8o6kMv1hHolesKV7FA0",
     "token": "O8ueQ7-IzACyQ5XpXW6Pza5AJlyOMVHZ7ogz3EqZ8SI", "status": "pending"},
]
AUTHZ = [B + "/authZ/HocgP7hTvP04VD7mP1jmmM5W0LB_yPgihnNbwRahNMY",
         B + "/authZ/0lBsaVaxz7aQpRagNjV2a2wZyWksQwUgjXA7GC4xlEA"]
IDENTIFIERS = [{"type": "dns", "value": "example.org"}, {"type": "dns", "value": "www.example.org"}]
FINALIZE = B + "/finalize-order/fMY6LxLfs9-Zku2Yxfsb2jUp3ktRaYXzkoGfDMC4Ygw"


def order(status, **more):
    return dict({"status": status, "expires": "2026-11-29T06:01:00Z", "identifiers": IDENTIFIERS,
                 "finalize": FINALIZE, "authorizations": AUTHZ}, **more)


DIRECTORY = {
    "pebble": pebble({"keyChange": B + "/rollover-account-key",
                      "meta": {"externalAccountRequired": False,
                               "termsOfService": "data:text/plain,Do%20what%20thou%20wilt"},
                      "newAccount": B + "/sign-me-up", "newNonce": B + "/nonce-plz",
                      "newOrder": B + "/order-plz", "revokeCert": B + "/revoke-cert"}),
    "letsencrypt": json.dumps({
        "keyChange": "https://acme-v02.api.letsencrypt.org/acme/key-change",
        "meta": {"caaIdentities": ["letsencrypt.org"],
                 "profiles": {"classic": "https://letsencrypt.org/docs/profiles#classic"},
                 "termsOfService": "https://letsencrypt.org/documents/LE-SA-v1.5-February-24-2025.pdf",
                 "website": "https://letsencrypt.org"},
        "newAccount": "https://acme-v02.api.letsencrypt.org/acme/new-acct",
        "newNonce": "https://acme-v02.api.letsencrypt.org/acme/new-nonce",
        "newOrder": "https://acme-v02.api.letsencrypt.org/acme/new-order",
        "renewalInfo": "https://acme-v02.api.letsencrypt.org/draft-ietf-acme-ari-03/renewalInfo",
        "revokeCert": "https://acme-v02.api.letsencrypt.org/acme/revoke-cert",
        "Zx1Kq3bXcd8": "https://community.letsencrypt.org/t/adding-random-entries-to-the-directory/33417"},
        indent=2).encode(),
    "http-url": b'{"newNonce":"http://a/n","newAccount":"https://a/a","newOrder":"https://a/o"}',
    "meta-not-object": b'{"newNonce":"https://a/n","newAccount":"https://a/a","newOrder":"https://a/o","meta":[]}',
    "duplicate-key": b'{"newNonce":"https://a/n","newNonce":"https://b/n","newAccount":"https://a/a","newOrder":"https://a/o"}',
}

ORDER = {
    "pebble-pending": pebble(order("pending")),
    "pebble-ready": pebble(order("ready")),
    "pebble-processing": pebble(order("processing")),
    "pebble-valid": pebble(order("valid", certificate=B + "/certZ/2c46c9444932e38f")),
    "invalid-with-error": pebble(order("invalid", error={
        "type": "urn:ietf:params:acme:error:unauthorized",
        "detail": "Error finalizing order :: authorizations for these identifiers not found: example.org\n\x1b[31m"})),
    "valid-without-certificate": pebble(order("valid")),
    "many-authorizations": json.dumps(dict(order("pending"), authorizations=[AUTHZ[0]] * 101)).encode(),
    "authorization-not-string": json.dumps(dict(order("pending"), authorizations=[AUTHZ[0], 7])).encode(),
    "nested-deep": b'{"status":"pending","authorizations":' + b"[" * 3000 + b"]" * 3000 + b"}",
    "status-unknown": json.dumps(order("frozen")).encode(),
}

AUTHORIZATION = {
    "pebble-pending": pebble({"status": "pending", "identifier": IDENTIFIERS[1], "challenges": CHALLENGES,
                              "expires": "2026-11-28T07:01:00Z"}),
    "pebble-valid": pebble({"status": "valid", "identifier": IDENTIFIERS[0],
                            "challenges": [dict(CHALLENGES[0], status="valid", validated="2026-11-28T06:01:00Z")],
                            "expires": "2026-11-28T07:01:00Z"}),
    "invalid-connection": pebble({"status": "invalid", "identifier": IDENTIFIERS[0], "challenges": [dict(
        CHALLENGES[0], status="invalid", error={
            "type": "urn:ietf:params:acme:error:connection",
            "detail": "127.0.0.1: Fetching http://example.org/.well-known/acme-challenge/"
                      "xcMnbtPaJ7RHRnUfW2-sMR1gpnmsPcDbY1yrUKYhLvM: Connection refused", "status": 400})],
        "expires": "2026-11-28T07:01:00Z"}),
    "wildcard": pebble({"status": "pending", "identifier": IDENTIFIERS[0], "wildcard": True,
                        "challenges": [CHALLENGES[2]]}),
    "token-path": json.dumps({"status": "pending", "identifier": IDENTIFIERS[0],
                              "challenges": [dict(CHALLENGES[0], token="../../etc/passwd")]}).encode(),
    "unknown-type-no-token": json.dumps({"status": "pending", "identifier": IDENTIFIERS[0],
                                         "challenges": [{"type": "new-01", "url": B + "/c", "status": "pending"}]}).encode(),
    "ip-identifier": json.dumps({"status": "pending", "identifier": {"type": "ip", "value": "127.0.0.1"},
                                 "challenges": []}).encode(),
    "many-challenges": json.dumps({"status": "pending", "identifier": IDENTIFIERS[0],
                                   "challenges": [CHALLENGES[0]] * 101}).encode(),
}

PROBLEM = {
    "pebble-badnonce": pebble({"type": "urn:ietf:params:acme:error:badNonce",
                               "detail": "JWS has an invalid anti-replay nonce: bogus", "status": 400}),
    "pebble-malformed": pebble({"type": "urn:ietf:params:acme:error:malformed",
                                "detail": "Order did not specify any identifiers", "status": 400}),
    "letsencrypt-ratelimited": json.dumps({
        "type": "urn:ietf:params:acme:error:rateLimited",
        "detail": "too many certificates (5) already issued for this exact set of identifiers in the last "
                  "168h0m0s, retry after 2025-01-02 04:00:00 UTC: see "
                  "https://letsencrypt.org/docs/rate-limits/#new-certificates-per-exact-set-of-identifiers",
        "status": 429}, indent=2).encode(),
    "subproblems": json.dumps({"type": "urn:ietf:params:acme:error:rejectedIdentifier",
                               "detail": "Some of the identifiers requested were rejected",
                               "subproblems": [{"type": "urn:ietf:params:acme:error:malformed",
                                                "detail": "Invalid underscore in DNS name \"_example.org\"",
                                                "identifier": {"type": "dns", "value": "_example.org"}}]}).encode(),
    "empty": b"{}",
    "html": b"<html><body><h1>502 Bad Gateway</h1></body></html>\n",
    "long-detail": json.dumps({"type": "about:blank", "detail": "\u00e9" * 400}).encode(),
}

RENEWAL_INFO = {
    "letsencrypt": json.dumps({"suggestedWindow": {"start": "2025-01-02T04:00:00Z", "end": "2025-01-03T04:00:00Z"},
                               "explanationURL": "https://acme.example.com/docs/ari"}, indent=2).encode(),
    "fractions-offsets": b'{"suggestedWindow":{"start":"2025-01-02T04:00:00.123456+01:30","end":"2025-01-03t04:00:00z"}}',
    "end-before-start": b'{"suggestedWindow":{"start":"2025-01-03T04:00:00Z","end":"2025-01-02T04:00:00Z"}}',
    "not-leap-year": b'{"suggestedWindow":{"start":"2025-02-29T04:00:00Z","end":"2025-03-02T04:00:00Z"}}',
    "leap-second": b'{"suggestedWindow":{"start":"2016-12-31T23:59:60Z","end":"2017-01-02T00:00:00-23:59"}}',
}

RETRY_AFTER = {
    "seconds": b"120",
    "seconds-spaces": b" \t3600 ",
    "imf-fixdate": b"Tue, 14 Nov 2023 23:13:20 GMT",
    "rfc850": b"Tuesday, 14-Nov-23 22:14:20 GMT",
    "asctime": b"Tue Nov 14 22:14:50 2023",
    "past": b"Sun, 06 Nov 1994 08:49:37 GMT",
    "not-gmt": b"Tue, 14 Nov 2023 22:13:20 UTC",
    "negative": b"-1",
    "huge": b"9" * 400,
    "fraction": b"1.5",
}

# pebble's chain (leaf with two DNS names and an authorityKeyIdentifier, then its
# intermediate), and a tls-alpn-01 certificate from acme_alpn_pem (no AKI, the
# critical acmeIdentifier extension).
PEBBLE_CHAIN = """-----BEGIN CERTIFICATE-----
MIICnzCCAYegAwIBAgIILEbJREky448wDQYJKoZIhvcNAQELBQAwKDEmMCQGA1UE
AxMdUGViYmxlIEludGVybWVkaWF0ZSBDQSAxMjlkZTkwHhcNMjYxMTI4MDYwMTAy
WhcNMzExMTI4MDYwMTAxWjAWMRQwEgYDVQQDEwtleGFtcGxlLm9yZzBZMBMGByqG
SM49AgEGCCqGSM49AwEHA0IABOvYopZZwi6NVeEL1EvTxH3y14jikwYv9nHOEmTH
A5kpkKpWD09tH9r6nPK1+G78SyfcnUNe00dGF+qDIjHbGrijgakwgaYwDgYDVR0P
AQH/BAQDAgWgMB0GA1UdJQQWMBQGCCsGAQUFBwMBBggrBgEFBQcDAjAMBgNVHRMB
Af8EAjAAMB0GA1UdDgQWBBTUdoYLt0tdPyWWs5W1oEPBAAgMJzAfBgNVHSMEGDAW
gBSpcU9hVD8lpxWFvc4jmqLKe0YnITAnBgNVHREEIDAeggtleGFtcGxlLm9yZ4IP
d3d3LmV4YW1wbGUub3JnMA0GCSqGSIb3DQEBCwUAA4IBAQBy2se7jVJaxuWPShdX
olpLj8lG11ZLIoqRFNz7f3QGIVQOQpuhLOBzYuBY8683el8PsIzmiJWLczF4Yax6
xnfrl67zCAvwfgobgfmUagbwsFciRLIGxbGXVgBEvQ9/t2awQyaXrGshI/gpd9N8
CPfh1cSBL04vZwnwIdfexEGZnAt7lmCwdIHUCTTeOy6cRJkew+F9vh7XbXQZbHUe
znhNGQ/jknB0A9iG3sBm9mxVHLcxyB7vFBn1On+/eAJRVqWiNe/VPHNNPtdick+u
VcwFMQJRs9O3toxq9DEqCSu9JFhO7p/3zn2C03mfHNxA5sAxqpQs2ro0l5NO0l22
UB5n
-----END CERTIFICATE-----
-----BEGIN CERTIFICATE-----
MIIDUDCCAjigAwIBAgIINYxK+84J2FcwDQYJKoZIhvcNAQELBQAwIDEeMBwGA1UE
AxMVUGViYmxlIFJvb3QgQ0EgNGQzNjAxMCAXDTI2MTEyODA2MDA1MloYDzIwNTYx
MTI4MDYwMDUyWjAoMSYwJAYDVQQDEx1QZWJibGUgSW50ZXJtZWRpYXRlIENBIDEy
OWRlOTCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBAJnTZZOtgajYnuck
uROMOZuLq9dFmyrhqu+3MpPUclsyHlTR1dd3YB18FWm6tBvM+RLY4v9HWUF9tAeb
7jw3n55GCIQalVg0uaILXboUOjq67z0ZvMCOFLf31egydVh138ztgxWdKx3ga4vc
dacLZxqJkR92tFk9S1bC6fAeSRLFPZjBpNXR8ib7h27e3VW83fKrbaXoEZ0YheE8
54Ha+upW07Z8l4cr/RNAhz7Av+NQaaB7Azs7IpPSPz9IceXAvcoIhFzYexgMWQJc
GGhiSZCFV7YIQWEHpwMqoqq6+BmvHINyl0GV3WOZsNY81l1NK8HvW6dwzoQuR/Ex
OtPoEQMCAwEAAaOBgzCBgDAOBgNVHQ8BAf8EBAMCAoQwHQYDVR0lBBYwFAYIKwYB
BQUHAwEGCCsGAQUFBwMCMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYEFKlxT2FU
PyWnFYW9ziOaosp7RichMB8GA1UdIwQYMBaAFD1VgykUdhS5V6g6FKvQ4hBsvfjL
MA0GCSqGSIb3DQEBCwUAA4IBAQB3ABcZuRyIHvedngnbtBP2QZHwzJVpwYOSMQBc
6Y64PqoYnD5tyGfrlBRVr1RhAg/hn8OI9OEeKxqzSWOSRb/DPqS0nQA+02EH7uSp
937sMrzi/YhcYewUesyVK7Cv8K5ogFYf2sAh+NXSZK2N/C7ClehdckyT+5WukGqm
3b6d3ScYKFnhS1E2XnXZkNGybyh2dr9Ib4oRiyctuwcTPUJG1IXFI+Sp857G4SYN
zVUbpPH2oKEu9n748OfN9Or8JZP+A0KNJEy5R/oO7oMQornl439wrAuu357pjTjI
CR6RyR+7qITwsLB7aOSo+RN4qk2RzMuwK7MrIovB76MN7CE4
-----END CERTIFICATE-----
"""
ALPN_CERTIFICATE = """-----BEGIN CERTIFICATE-----
MIIBeDCCAR2gAwIBAgIQfDbH1UxtjV4euk7p/T1K9jAKBggqhkjOPQQDAjAWMRQw
EgYDVQQDDAtleGFtcGxlLm9yZzAeFw0yNjExMjgwNjAwMzBaFw0yNjEyMDUwNjAw
MzBaMBYxFDASBgNVBAMMC2V4YW1wbGUub3JnMFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAE72OphefOhtjWGrfqMC5E9LgbK++zXGZS8wg96iX7R+WGHIeIStQNajNc
Hsl/JqzjIpfyIWlPgf/dq0SFDUFElKNNMEswFgYDVR0RBA8wDYILZXhhbXBsZS5v
cmcwMQYIKwYBBQUHAR8BAf8EIgQgsYAwVrqDtVOuJZvAHurSAYPoEt5fFV/C4bdS
OOW+o5YwCgYIKoZIzj0EAwIDSQAwRgIhANWt1t51RD2eb36tfPZdFp9/pzqyEJx2
1tIR5iOqKJXVAiEA4qLoMOTRJbIwwE0KxB1awSf5cET4icuffg3y5vNlPkU=
-----END CERTIFICATE-----
"""

CERTIFICATE = {
    "pebble-chain": PEBBLE_CHAIN.encode(),
    "tls-alpn-01": ALPN_CERTIFICATE.encode(),
    "leaf-only": PEBBLE_CHAIN.split("-----END CERTIFICATE-----")[0].encode() + b"-----END CERTIFICATE-----\n",
    "truncated": PEBBLE_CHAIN[:600].encode(),
    "not-pem": b"not a certificate\n",
}


def write(seeds):
    directory = os.path.join(HERE, "corpus", "acme")
    os.makedirs(directory, exist_ok=True)
    for selector, (kind, group) in enumerate(seeds):
        for name, data in group.items():
            with open(os.path.join(directory, kind + "-" + name), "wb") as f:
                f.write(bytes([selector]) + data)


if __name__ == "__main__":
    write([("directory", DIRECTORY), ("order", ORDER), ("authorization", AUTHORIZATION), ("problem", PROBLEM),
           ("renewal-info", RENEWAL_INFO), ("retry-after", RETRY_AFTER), ("certificate", CERTIFICATE)])
