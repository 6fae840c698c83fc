#!/usr/bin/env python3
"""Writes the seed corpus: fuzz/corpus/http/, chunked/, config/, path/,
response/ and http_client/.

The seeds are checked in; this script documents what each one is and can
rewrite them (./make-seeds.py from fuzz/). libFuzzer starts from these and
keeps what it finds in fuzz/work/, which is not checked in."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

BROWSER = (b"GET /blog/2024/05/hello-world?utm_source=feed&x=%C3%A9 HTTP/1.1\r\n"
           b"Host: www.example.com\r\n"
           b"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0\r\n"
           b"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
           b"Accept-Language: en-US,en;q=0.5\r\n"
           b"Accept-Encoding: gzip, deflate, br\r\n"
           b"Referer: https://www.example.com/\r\n"
           b"Cookie: session=abc123; theme=dark\r\n"
           b"Connection: keep-alive\r\n"
           b"Upgrade-Insecure-Requests: 1\r\n"
           b"If-None-Match: \"5f3c-1a2b\"\r\n"
           b"X-Name: Ren\xc3\xa9e \t \r\n"
           b"\r\n")

HTTP = {
    "get-minimal": b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "get-browser": BROWSER,
    "get-http10-no-host": b"GET /index.html HTTP/1.0\r\n\r\n",
    "get-bare-lf": b"GET / HTTP/1.1\nHost: a.example\nAccept: */*\n\n",
    "get-leading-empty-lines": b"\r\n\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "post-content-length": b"POST /form HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                           b"Content-Length: 27\r\n\r\nname=rsp&comment=hello+world",
    "post-chunked": b"POST /upload HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: yes\r\n\r\n",
    "smuggle-cl-te": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "smuggle-two-cl": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "same-two-cl": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello",
    "te-not-chunked": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "te-http10": b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "obs-fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: first\r\n  second\r\n\r\n",
    "space-before-colon": b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
    "bare-cr-header": b"GET / HTTP/1.1\r\nHost: a\rX-Evil: 1\r\n\r\n",
    "bare-cr-request-line": b"GET / HTTP/1.1\rHost: a\r\n\r\n",
    "http2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "http2-version": b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    "version-junk": b"GET / HTTP/1.10\r\nHost: a\r\n\r\n",
    "version-lowercase": b"GET / http/1.1\r\nHost: a\r\n\r\n",
    "huge-target": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
    "huge-header": b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n",
    "many-headers": b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-H%d: %d\r\n" % (i, i) for i in range(101)) + b"\r\n",
    "hop-by-hop": b"GET /chat HTTP/1.1\r\nHost: chat.example\r\nConnection: Upgrade, X-Secret ,content-length,\r\n"
                  b"Upgrade: websocket\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X\r\nProxy-Connection: close\r\n"
                  b"X-Secret: drop me\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2\r\nX-Forwarded-For:\r\n"
                  b"X-Real-IP: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\n\r\n",
    "host-ipv6-port": b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
    "host-odd": b"GET / HTTP/1.1\r\nHost: user@evil.example:80x\r\n\r\n",
    "host-twice": b"GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
    "host-empty": b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
    "absolute-form": b"GET http://example.com:8080/path?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    "absolute-form-https-mismatch": b"GET https://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n",
    "connect-authority": b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "options-star": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "control-bytes": b"GET / HTTP/1.1\r\nHost: a\r\nX-Nul: a\x00b\r\nX-Del: \x7f\r\n\r\n",
    "empty-value-blanks": b"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank: \t \r\n\r\n",
    "pipelined": b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
    "two-spaces": b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
    "no-target": b"GET HTTP/1.1\r\n\r\n",
    "long-content-length": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
}

CHUNKED = {
    "simple": b"5\r\nhello\r\n0\r\n\r\n",
    "several-chunks": b"4\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n",
    "hex-cases": b"a\r\n0123456789\r\nA\r\n0123456789\r\n00\r\n\r\n",
    "extensions": b"5;name=value;quoted=\"a b;c\"\r\nhello\r\n0;last; x=\"\t\"\r\n\r\n",
    "trailers": b"3\r\nabc\r\n0\r\nExpires: Wed, 21 Oct 2015 07:28:00 GMT\r\nX-Checksum: \t1234\r\n\r\n",
    "then-next-request": b"3\r\nabc\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
    "leading-zeros": b"0000005\r\nhello\r\n000\r\n\r\n",
    "largest-size": b"fffffffffffffff\r\nonly a little of it",
    "size-overflow": b"10000000000000000\r\nx\r\n0\r\n\r\n",
    "bare-lf": b"5\nhello\n0\n\n",
    "missing-crlf-after-data": b"5\r\nhelloX0\r\n\r\n",
    "size-with-space": b"5 \r\nhello\r\n0\r\n\r\n",
    "size-0x": b"0x5\r\nhello\r\n0\r\n\r\n",
    "negative-size": b"-5\r\nhello\r\n0\r\n\r\n",
    "long-extension": b"1;" + b"e" * 5000 + b"\r\nx\r\n0\r\n\r\n",
    "trailer-fold": b"0\r\nX-A: 1\r\n continued\r\n\r\n",
    "data-looks-like-end": b"c\r\n0\r\n\r\n0\r\n\r\n\r\n0\r\n\r\n",
    "big-chunk": b"400\r\n" + bytes(range(256)) * 4 + b"\r\n0\r\n\r\n",
    "empty-size": b"\r\n0\r\n\r\n",
    "cr-in-trailer": b"0\r\nX-A: 1\rX-B: 2\r\n\r\n",
    "trailer-space-before-colon": b"0\r\nX-A : 1\r\n\r\n",
    "trailer-no-colon": b"0\r\nX-A 1\r\n\r\n",
    "trailer-name-not-token": b"0\r\nX(A)@: 1\r\n\r\n",
    "trailer-empty-name": b"0\r\n: 1\r\n\r\n",
    "trailer-nul-del": b"0\r\nX-A: 1\x00\x7f\r\n\r\n",
    "trailer-tchars": b"0\r\n!#$%&'*+-.^_`|~09azAZ:\t\xff v \r\nX-Empty:\r\n\r\n",
    "trailers-100": b"0\r\n" + b"".join(b"T%d:%d\r\n" % (i, i) for i in range(100)) + b"\r\n",
    "trailers-101": b"0\r\n" + b"".join(b"T%d:%d\r\n" % (i, i) for i in range(101)) + b"\r\n",
}

CONFIG = {
    "quickstart.lua": b'listen = "127.0.0.1:8000"\nbackends = { "127.0.0.1:8001" }\n',
    "personal-site.lua": b'-- two app servers\nlisten = 80\nbackends = {\n  "127.0.0.1:8080",\n  "127.0.0.1:8081",\n}\n'
                         b'balance = "least_conn"\ndown_time = 5\n',
    "sites.lua": b'listen = "[::1]:8000"\nbackends = { "127.0.0.1:8001" }\nsites = {\n'
                 b'  ["www.example.com"] = { backends = { "127.0.0.1:8002", "[::1]:8003" }, balance = "least_conn" },\n'
                 b'  ["*.example.com"] = { backends = { "localhost:8004" } },\n'
                 b'  ["Blog.Example.ORG."] = { backends = { "127.0.0.1:8005" } },\n}\n'
                 b'max_request_line = 4096\nmax_request_head = 16384\ndown_time = 0.5\n',
    "sites-only.lua": b'listen = 8080\nsites = { ["a.test"] = { backends = { "127.0.0.1:1" } } }\n',
    "computed.lua": b'local base = 8000\nlisten = tostring(base)\nbackends = {}\n'
                    b'for i = 1, 64 do backends[#backends + 1] = "127.0.0.1:" .. (base + i) end\n',
    "too-many-backends.lua": b'listen = 1\nbackends = {}\nfor i = 1, 65 do backends[i] = "127.0.0.1:" .. i end\n',
    "bad-values.lua": b'listen = "0008000"\nbackends = { "127.0.0.1:80", "127.0.0.1:80" }\nbalance = "random"\n'
                      b'down_time = 0/0\nmax_request_line = 2048\nmax_request_head = 1024\n',
    "bad-types.lua": b'listen = { 80 }\nbackends = "127.0.0.1:80"\nsites = { [1] = {}, [true] = 1, ["x\\0y"] = {} }\n',
    "old-names.lua": b'listenPort = 8000\nbackendAddress = "127.0.0.1"\nbackendPort = 8001\n',
    "metatable-on-G.lua": b'setmetatable(_G, { __index = function(t, k) error("no " .. k) end,\n'
                          b'  __newindex = function(t, k, v) rawset(t, k, v) end })\nlisten = 8000\n'
                          b'backends = setmetatable({}, { __len = function() return 64 end, __index = function() return 1 end })\n',
    "gc-finalizers.lua": b'listen = 8000\nbackends = { "127.0.0.1:1" }\nlocal keep = {}\nfor i = 1, 50 do\n'
                         b'  local p = newproxy(true)\n  getmetatable(p).__gc = function() error("boom") end\n  keep[i] = p\nend\n'
                         b'collectgarbage("setpause", 1)\n',
    "errors.lua": b'listen = 8000\nbackends = { "127.0.0.1:1" }\nif #backends == 1 then error({ "not a string" }) end\n',
    "syntax-error.lua": b'listen = 8000\nbackends = { "127.0.0.1:1" \n[[unfinished long string\n',
    "sites-twice.lua": b'listen = 8000\nsites = { ["Example.com"] = { backends = { "127.0.0.1:1" } },\n'
                       b'  ["example.com."] = { backends = { "127.0.0.1:2" } } }\nmax_request_line = 300.5\n',
    "route.lua": b'listen = 8000\npools = {\n  app = { backends = { "127.0.0.1:8001", "127.0.0.1:8002" }, balance = "least_conn" },\n  static = { backends = { "127.0.0.1:8003" } },\n}\nsites = { ["www.example.com"] = { pool = "app" }, ["img.example.com"] = { backends = { "127.0.0.1:8004" } } }\nroute_time_limit = 0.05\nfunction route(req)\n  if req.path:find("^/static/") then return "static" end\n  if req.host == "old.example.com" then return { status = 301, location = "https://new.example.com" .. req.path } end\n  if req.headers["x-blocked"] then return { status = 403 } end\n  if req.method == "HEAD" then return { status = 200, body = "hi", headers = { ["Set-Cookie"] = { "a=1", "b=2" }, ["X-N"] = 5 } } end\n  if req.query ~= "" then return { status = 204 } end\n  if req.client == "192.0.2.1" and req.version == "1.1" then return "app" end\n  return nil\nend\n',
    "route-bad.lua": b'listen = "127.0.0.1:8000"\nroute = function(req)\n  local n = #req.target\n  if n % 7 == 0 then error("boom") end\n  if n % 7 == 1 then while true do end end\n  if n % 7 == 2 then return { status = 200, headers = { ["X-A"] = "a\\r\\nb" } } end\n  if n % 7 == 3 then return { status = "x" } end\n  if n % 7 == 4 then return "nope" end\n  if n % 7 == 5 then return { status = 304, body = "x" } end\n  return coroutine.yield()\nend\n',
    "route-gc.lua": b'listen = 8000\npools = { p = { backends = { "127.0.0.1:1" } } }\nlocal keep = {}\nfunction route(req)\n  for i = 1, 20 do\n    local p = newproxy(true)\n    getmetatable(p).__gc = function() error("boom in __gc") end\n    keep[#keep + 1] = p\n  end\n  if #keep > 40 then keep = {} collectgarbage() end\n  return "p"\nend\ncollectgarbage("setpause", 1)\n',
    "hosts.lua": b'listen = "host.example:80"\nbackends = { "[::1]", "::1:80", "[::1]:0", "[fe80::1%lo]:80", "1.2.3.4:65536", ":80" }\n',
}


PATH = {
    "absolute": b'http://Example.COM:8080/a/../b?c',
    "absolute-empty": b'https://example.com?x',
    "asterisk": b'*',
    "authority": b'example.com:443',
    "dot-escapes": b'/static/%2e%2E/%2E./admin',
    "dots": b'/a/./b/../../c/./../..',
    "escapes": b'/%61dmin/%7euser/%2fetc%2Fpasswd/%20%zz%4',
    "long": b'/a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../a/../end',
    "plain": b'/blog/2024/05/hello-world',
    "query": b'/search?q=a/../b&x=%2e%2e',
    "root": b'/',
    "slashes": b'//admin///x//',
    "trailing": b'/a/b/.',
}


# What a backend sends, for fuzz_response.c. The harness takes the first
# byte as flags (bit 0: the request was HEAD): write() puts REQUEST_GET (or
# REQUEST_HEAD for a name ending in "-to-head") before each response.
REQUEST_GET, REQUEST_HEAD = b"\x00", b"\x01"

RESPONSE = {
    "content-length": b"HTTP/1.1 200 OK\r\nDate: Mon, 27 Jul 2009 12:28:53 GMT\r\nServer: Apache\r\n"
                      b"Last-Modified: Wed, 22 Jul 2009 19:15:56 GMT\r\nETag: \"34aa387-d-1568eb00\"\r\n"
                      b"Accept-Ranges: bytes\r\nContent-Length: 13\r\nVary: Accept-Encoding\r\n"
                      b"Content-Type: text/plain\r\n\r\nHello, world!",
    "chunked-bad-trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
                           b"X-A : 1\r\n folded\r\n\r\n",
    "chunked-trailers": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                        b"Trailer: Expires\r\n\r\n7\r\nMozilla\r\n9;ext=x\r\nDeveloper\r\n7\r\nNetwork\r\n"
                        b"0\r\nExpires: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n",
    "no-content-204": b"HTTP/1.1 204 No Content\r\nDate: Mon, 27 Jul 2009 12:28:53 GMT\r\n"
                      b"Content-Length: 0\r\n\r\n",
    "not-modified-304": b"HTTP/1.1 304 Not Modified\r\nETag: \"abc\"\r\nContent-Length: 1234\r\n\r\n",
    "switching-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x05hello",
    "early-hints-103-then-200": b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
                                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n"
                                b"Link: </style.css>; rel=preload; as=style\r\n\r\nhello",
    "continue-100-then-chunked": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nLocation: /x/1\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "http10-close-delimited": b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the server closes",
    "http10-keep-alive": b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n"
                         b"Content-Length: 2\r\n\r\nhi",
    "close-with-length": b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 3\r\n\r\nerr",
    "content-length-to-head": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1234\r\n\r\n",
    "chunked-to-head": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    "hop-by-hop": b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Private ,\r\nKeep-Alive: timeout=5\r\n"
                  b"X-Private: secret\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-Sum\r\n"
                  b"Upgrade: h2c\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n",
    "te-and-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"5\r\nhello\r\n0\r\n\r\n",
    "te-gzip-chunked": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: gzip\r\n"
                       b"transfer-encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "te-chunked-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
    "te-gzip-only": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b\x08\x00",
    "two-lengths-differ": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "two-lengths-same": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello",
    "length-list": b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello",
    "length-huge": b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999999\r\n\r\nx",
    "bare-lf-no-reason": b"HTTP/1.1 200\nContent-Length: 1\n\nx",
    "then-next-response": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n continued\r\nContent-Length: 0\r\n\r\n",
    "http2-status": b"HTTP/2 200\r\ncontent-length: 0\r\n\r\n",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n",
}


# What an ACME server sends rsp's own client, for fuzz_http_client.c. The
# first byte is the harness's: bit 0, the request was HEAD; bits 1-3, the
# body limit (6: 1 MiB, 1: one byte, 3: 64 bytes). The RESPONSE seeds go
# in too, with a 1 MiB limit.
CLIENT_MIB, CLIENT_MIB_HEAD, CLIENT_1, CLIENT_64 = b"\x0c", b"\x0d", b"\x02", b"\x06"
DIRECTORY = (b'{"keyChange":"https://127.0.0.1:14000/rollover-account-key","meta":{"externalAccountRequired":false,'
             b'"termsOfService":"data:text/plain,Do%20what%20thou%20wilt"},"newAccount":"https://127.0.0.1:14000/sign-me-up",'
             b'"newNonce":"https://127.0.0.1:14000/nonce-plz","newOrder":"https://127.0.0.1:14000/order-plz",'
             b'"renewalInfo":"https://127.0.0.1:14000/draft-ietf-acme-ari-03/renewalInfo/",'
             b'"revokeCert":"https://127.0.0.1:14000/revoke-cert"}')
PROBLEM = b'{"type":"urn:ietf:params:acme:error:badNonce","detail":"JWS has an invalid anti-replay nonce","status":400}'
CHAIN = b"-----BEGIN CERTIFICATE-----\nMIIB" + b"A" * 600 + b"\n-----END CERTIFICATE-----\n"
HTTP_CLIENT = {
    "acme-directory": CLIENT_MIB + b"HTTP/1.1 200 OK\r\nCache-Control: public, max-age=0, no-cache\r\n"
                      b"Content-Type: application/json; charset=utf-8\r\nLink: <https://127.0.0.1:14000/dir>;rel=\"index\"\r\n"
                      b"Date: Sat, 28 Nov 2026 06:02:47 GMT\r\nContent-Length: %d\r\n\r\n" % len(DIRECTORY) + DIRECTORY,
    "acme-new-nonce-head": CLIENT_MIB_HEAD + b"HTTP/1.1 200 OK\r\nCache-Control: public, max-age=0, no-cache\r\n"
                           b"Link: <https://127.0.0.1:14000/dir>;rel=\"index\"\r\nReplay-Nonce: 4t8QEfOKpF7Mh0jX0TqKuQ\r\n"
                           b"Date: Sat, 28 Nov 2026 06:02:47 GMT\r\n\r\n",
    "acme-account-201": CLIENT_MIB + b"HTTP/1.1 201 Created\r\nContent-Type: application/json; charset=utf-8\r\n"
                        b"Link: <https://127.0.0.1:14000/dir>;rel=\"index\"\r\nLocation: https://127.0.0.1:14000/my-account/1\r\n"
                        b"Replay-Nonce: b2yTxv6Q3fC4mDXq9Zs3Ng\r\nContent-Length: 44\r\n\r\n"
                        b'{"status":"valid","contact":["mailto:a@b"]}\n',
    "acme-bad-nonce-chunked": CLIENT_MIB + b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n"
                              b"Replay-Nonce: zzz\r\nRetry-After: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                              b"%x\r\n" % len(PROBLEM) + PROBLEM + b"\r\n0\r\n\r\n",
    "acme-chain-close-delimited": CLIENT_MIB + b"HTTP/1.1 200 OK\r\nContent-Type: application/pem-certificate-chain\r\n"
                                  b"Link: <https://127.0.0.1:14000/certZ/alternate/1>;rel=\"alternate\"\r\n"
                                  b"Link: <https://127.0.0.1:14000/certZ/alternate/2>;rel=\"alternate\"\r\n"
                                  b"Connection: close\r\n\r\n" + CHAIN + CHAIN,
    "too-large-length": CLIENT_64 + b"HTTP/1.1 200 OK\r\nContent-Length: 65\r\n\r\n" + b"x" * 65,
    "too-large-chunked": CLIENT_1 + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n",
    "too-large-close": CLIENT_64 + b"HTTP/1.1 200 OK\r\n\r\n" + b"y" * 100,
    "head-too-large": CLIENT_MIB + b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 16400 + b"\r\n\r\n",
    "cut-in-body": CLIENT_MIB + b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
    "cut-in-head": CLIENT_MIB + b"HTTP/1.1 200 OK\r\nContent-Le",
    "empty": CLIENT_MIB,
}


def write(kind, seeds):
    directory = os.path.join(HERE, "corpus", kind)
    os.makedirs(directory, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("http", HTTP)
    write("chunked", CHUNKED)
    write("config", CONFIG)
    write("path", PATH)
    write("response", {name: (REQUEST_HEAD if name.endswith("-to-head") else REQUEST_GET) + data
                       for name, data in RESPONSE.items()})
    write("http_client", dict({"response-" + name: (CLIENT_MIB_HEAD if name.endswith("-to-head") else CLIENT_MIB) + data
                               for name, data in RESPONSE.items()}, **HTTP_CLIENT))
