-- HTTPS for one site, the certificate ordered by rsp itself (chapter 19).
listen = 80
sites = { ["blog.example.org"] = { backends = { "127.0.0.1:3000" } } }
tls = {
  listen = 443,
  acme = { agree_to_terms = true, email = "me@example.org" },
  redirect_http = true,
}
