-- /etc/rsp/rsp.lua: rsp in front of a personal website.
-- Check it with `sudo rsp -t /etc/rsp/rsp.lua`, then `systemctl reload rsp`.
-- Every setting, with its type and default: `man rsp.lua`; the command and
-- its signals: `man rsp`. The operator's guide (README.md) and more
-- examples (examples/): /usr/share/doc/rsp/.

listen = 80                        -- every address, IPv6 and IPv4

-- Where requests go: your web server or application, on this machine.
backends = { "127.0.0.1:8080" }    -- HOST:PORT; several are balanced

-- Virtual hosts by the Host header, if you serve more than one site:
-- sites = {
--   ["blog.example.com"] = { backends = { "127.0.0.1:2368" } },
-- }

user = "www-data"                  -- rsp starts as root, binds, then becomes this user
access_log = "/var/log/rsp/access.log"   -- one line per request (combined format);
                                   -- rotated by /etc/logrotate.d/rsp
shutdown_timeout = 10              -- on SIGTERM, seconds requests under way may take to finish
                                   -- (the unit's TimeoutStopSec = 15 must stay above it)

-- What rsp is doing: http://127.0.0.1:9090/ (also /status.json and, for
-- Prometheus, /metrics), from this machine only; and a worker per CPU.
-- status_listen = "127.0.0.1:9090"
-- workers = "auto"

-- HTTPS with certificates from Let's Encrypt, ordered and renewed by rsp
-- itself (doc/deploy.md; README.md, "HTTPS with Let's Encrypt"). First
-- point each name's A (and AAAA) record at this server and open ports 80
-- and 443. Adding tls takes a restart (443 is bound as root):
--   sudo rsp -t /etc/rsp/rsp.lua && sudo systemctl restart rsp
-- then `journalctl -u rsp` says "acme: NAME: certificate obtained".
-- tls = {
--   listen = 443,
--   acme = {
--     agree_to_terms = true,       -- required: you accept the CA's terms
--     email = "me@example.org",    -- optional: a contact address for the CA
--     -- Try Let's Encrypt's staging CA first (untrusted certificates,
--     -- generous limits), then delete this line and /var/lib/rsp/acme/*:
--     -- directory = "https://acme-staging-v02.api.letsencrypt.org/directory",
--     -- domains: by default every name in `sites`, one certificate each;
--     -- domains = { { "example.org", "www.example.org" }, "blog.example.org" },
--     -- storage = "/var/lib/rsp/acme",   -- the default: keys and certificates
--   },
--   redirect_http = true,          -- plain HTTP gets a 301 to https://
--   hsts = 300,                    -- Strict-Transport-Security max-age; start small
-- }
--
-- Or with certbot (a wildcard certificate needs its DNS-01 challenge):
-- certbot writes its challenges under acme_webroot, its deploy hook copies
-- the certificate to /etc/rsp/tls/ and reloads rsp; then tls names the
-- files in place of acme (both fail rsp -t until they exist):
-- acme_webroot = "/var/www/acme"
--   certificates = {               -- in tls; the first is the default, SNI picks by name
--     { cert = "/etc/rsp/tls/example.com/fullchain.pem",
--       key  = "/etc/rsp/tls/example.com/privkey.pem" },
--   },
