"""route(req): the config's Lua function that decides per request (stage 07).

Each test writes a config with `pools` and a `route` function, starts rsp on
it in front of test backends that report their name (X-Backend), and checks
where requests go, what rsp answers by itself, and that every way route can
fail costs one request a 500 and nothing else. The spec is chapter 07 and
the README's "Deciding per request, in Lua"."""

import re

import pytest

from checks import assert_config_error
from client import exchange, request
from netutil import free_port
from proxy import run_rsp


def hp(backend):
    return f'"{backend.host}:{backend.port}"'


def write_config(tmp_path, port, body):
    """A config listening on 127.0.0.1:port with the given Lua text."""
    path = tmp_path / f"route-{port}.lua"
    path.write_text(f'listen = "127.0.0.1:{port}"\n{body}\n')
    return path


def start(start_proxy, tmp_path, body):
    port = free_port()
    return start_proxy(args=[str(write_config(tmp_path, port, body))], port=port)


def get(port, target, host="www.example.com", headers=(), method="GET", source="127.0.0.1"):
    """client.request with Host www.example.com (and Connection: close)."""
    return request(port, target, method=method, headers=headers, host=host, source=source)


TWO_POOLS = """
pools = {{
  app    = {{ backends = {{ {app} }} }},
  static = {{ backends = {{ {static} }} }},
}}
"""


@pytest.fixture
def two(make_backend):
    return make_backend("app"), make_backend("static")


# -- choosing a pool -------------------------------------------------------------

@pytest.mark.stage(7)
def test_route_by_path_prefix_sees_normalized_paths(start_proxy, tmp_path, two):
    """/static/... goes to the static pool, the rest to app; spellings of
    the same path (escapes, dot segments, doubled slashes) cannot dodge the
    rule, and the backend receives the normalized path route judged."""
    app, static = two
    proxy = start(start_proxy, tmp_path, TWO_POOLS.format(app=hp(app), static=hp(static)) + """
function route(req)
  if req.path:find("^/static/") then return "static" end
  return "app"
end""")
    for target in ("/static/echo", "/%73tatic/echo", "/%73TATIC/../static/echo", "/a/../static/echo",
                   "/.//static/echo", "/./static//echo", "/x/%2e%2e/static/echo"):
        r = get(proxy.port, target)
        assert r.header("X-Backend") == "static", (target, r.raw[:200])
    for target in ("/echo", "/staticx/echo", "/static", "/stat%69c/../echo"):
        r = get(proxy.port, target)
        assert r.header("X-Backend") == "app", (target, r.raw[:200])
    assert dict(static.hits) == {"/static/echo": 7}, dict(static.hits)
    assert dict(app.hits) == {"/echo": 2, "/staticx/echo": 1, "/static": 1}, dict(app.hits)


@pytest.mark.stage(7)
def test_fragment_in_target_is_refused_before_route(start_proxy, tmp_path, backend):
    """A '#' never belongs in a request target, and backends disagree on it
    (some cut the path there): rsp answers 400 before route can judge one
    path while the backend serves another."""
    proxy = start(start_proxy, tmp_path, f"""
pools = {{ app = {{ backends = {{ {hp(backend)} }} }} }}
function route(req)
  if req.path:find("^/admin") then return {{ status = 403 }} end
  return "app"
end""")
    for target in ("/admin/#/../../public", "/public#x", "http://a.example/admin#/../x"):
        r = get(proxy.port, target)
        assert r.status == 400, (target, r.raw[:200])
    assert get(proxy.port, "/echo").status == 200
    assert backend.total_hits == 1


@pytest.mark.stage(7)
def test_request_table_fields(start_proxy, tmp_path, backend):
    """req as route sees it, sent back by a response table."""
    proxy = start(start_proxy, tmp_path, """
function route(req)
  local names = {}
  for name in pairs(req.headers) do names[#names + 1] = name end
  table.sort(names)
  local lines = { req.method, req.target, req.path, req.query, req.host, req.client, req.version }
  for _, name in ipairs(names) do lines[#lines + 1] = name .. "=" .. req.headers[name] end
  return { status = 200, body = table.concat(lines, "\\n") }
end""")
    r = exchange(proxy.port, b"GET /a/./b/%7e%3f/../c?x=1&y=%41 HTTP/1.1\r\nHost: WWW.Example.COM.:8080\r\n"
                             b"X-Multi: one\r\nUser-Agent: test\r\nx-multi: two\r\nConnection: close\r\n\r\n")
    assert r.status == 200, r.raw[:300]
    assert r.body.decode().split("\n") == [
        "GET", "/a/./b/%7e%3f/../c?x=1&y=%41", "/a/b/c", "x=1&y=%41", "www.example.com", "127.0.0.1", "1.1",
        "connection=close", "host=WWW.Example.COM.:8080", "user-agent=test", "x-multi=one, two"]
    r = exchange(proxy.port, b"HEAD http://Other.Example/p?q HTTP/1.0\r\n\r\n")
    assert r.status == 200 and r.body == b"", r.raw[:300]
    assert r.header("Content-Length") == str(len("HEAD\nhttp://Other.Example/p?q\n/p\nq\nother.example\n127.0.0.1\n1.0"))
    r = exchange(proxy.port, b"GET /%zz/%4 HTTP/1.0\r\n\r\n")
    assert r.body.decode().split("\n")[2:5] == ["/%25zz/%254", "", ""], r.body


# The README's redirect: "?" only before a query that is not empty.
REDIRECT_KEEPING_THE_QUERY = """
function route(req)
  local query = req.query ~= "" and "?" .. req.query or ""
  return { status = 301, location = "https://www.example.com" .. req.path .. query,
           headers = { ["X-Query-Type"] = type(req.query) } }
end"""


@pytest.mark.stage(7)
@pytest.mark.parametrize("target, location", [
    ("/old", "https://www.example.com/old"),
    ("/old?", "https://www.example.com/old"),
    ("/old?x=1&y=%41", "https://www.example.com/old?x=1&y=%41"),
    ("/a/../old??x", "https://www.example.com/old??x"),
    ("http://example.com", "https://www.example.com/"),
], ids=["no-query", "bare-question-mark", "query", "query-with-question-mark", "absolute-form"])
def test_redirect_keeps_the_query_and_adds_no_stray_question_mark(start_proxy, tmp_path, target, location):
    """req.query is always a string: what follows the first "?" as sent,
    "" without one (or with nothing after it). The README's redirect,
    which adds "?" only before a query that is not empty, sends the
    query on as it came and no "?" when there is none."""
    proxy = start(start_proxy, tmp_path, REDIRECT_KEEPING_THE_QUERY)
    r = get(proxy.port, target, host="example.com")
    assert r.status == 301, r.raw[:300]
    assert r.header("X-Query-Type") == "string", r.headers
    assert r.header("Location") == location, f"{target}: {r.header('Location')!r}"


@pytest.mark.stage(7)
def test_route_by_host_header_and_client_address(start_proxy, tmp_path, two):
    """A redirect for one host, a 403 for a header, a pool by client
    address: the answers come from rsp, and no backend hears of them."""
    app, static = two
    proxy = start(start_proxy, tmp_path, TWO_POOLS.format(app=hp(app), static=hp(static)) + """
function route(req)
  if req.host == "old.example.com" then
    return { status = 301, location = "https://new.example.com" .. req.path }
  end
  if req.headers["x-blocked"] then return { status = 403 } end
  if req.client == "127.0.0.2" then return "static" end
  return "app"
end""")
    r = get(proxy.port, "/a/../old?x", host="OLD.example.com:81")
    assert r.status == 301 and r.reason == "Moved Permanently", r.raw[:300]
    assert r.header("Location") == "https://new.example.com/old"
    assert r.header("Connection") == "close"
    assert int(r.header("Content-Length")) == len(r.body) > 0
    assert b"301 Moved Permanently" in r.body
    r = get(proxy.port, "/echo", headers=[("X-Blocked", "yes")])
    assert r.status == 403 and r.header("Content-Type") == "text/html; charset=utf-8", r.raw[:300]
    assert app.total_hits == 0 and static.total_hits == 0
    assert get(proxy.port, "/echo", source="127.0.0.2").header("X-Backend") == "static"
    assert get(proxy.port, "/echo", source="127.0.0.1").header("X-Backend") == "app"


@pytest.mark.stage(7)
def test_nil_falls_back_to_sites_and_sites_may_name_pools(start_proxy, tmp_path, make_backend):
    """nil: the site for Host (one naming a pool, one with its own
    backends), else 421 without a default site; a pool is shared by a site
    and route."""
    app, own = make_backend("app"), make_backend("own")
    proxy = start(start_proxy, tmp_path, f"""
pools = {{ app = {{ backends = {{ {hp(app)} }} }} }}
sites = {{
  ["www.example.com"] = {{ pool = "app" }},
  ["*.own.example"] = {{ backends = {{ {hp(own)} }} }},
}}
function route(req)
  if req.path == "/by-route/echo" then return "app" end
end""")
    assert get(proxy.port, "/echo", host="www.example.com").header("X-Backend") == "app"
    assert get(proxy.port, "/echo", host="a.OWN.example").header("X-Backend") == "own"
    assert get(proxy.port, "/by-route/echo", host="nowhere.example").header("X-Backend") == "app"
    r = get(proxy.port, "/echo", host="nowhere.example")
    assert r.status == 421, r.raw[:300]


@pytest.mark.stage(7)
def test_request_bodies_reach_the_chosen_pool_byte_exact(start_proxy, tmp_path, two):
    """A body goes to the pool route chose, whole; a request route answers
    itself gets its answer even with a body rsp never reads."""
    app, static = two
    proxy = start(start_proxy, tmp_path, TWO_POOLS.format(app=hp(app), static=hp(static)) + """
function route(req)
  if req.method == "PUT" then return { status = 405, headers = { Allow = "GET, POST" } } end
  return "static"
end""")
    body = bytes(range(256)) * 400
    r = request(proxy.port, "/echo", method="POST", host="a", body=body)
    assert r.status == 200 and r.json()["body_length"] == len(body), r.raw[:300]
    assert r.header("X-Backend") == "static"
    # (The test backend reads Content-Length bodies only; chunked ones are
    # checked byte for byte against a raw backend in test_http.py.)
    r = request(proxy.port, "/echo", method="PUT", host="a", body=body)
    assert r.status == 405 and r.header("Allow") == "GET, POST", r.raw[:300]


# -- answers -----------------------------------------------------------------------

@pytest.mark.stage(7)
def test_response_tables(start_proxy, tmp_path, backend):
    proxy = start(start_proxy, tmp_path, """
function route(req)
  local p = req.path
  if p == "/cookies" then return { status = 200, headers = { ["Set-Cookie"] = { "a=1", "b=2" }, ["X-N"] = 42 } } end
  if p == "/text" then return { status = 201, body = "made\\n" } end
  if p == "/json" then return { status = 200, body = "{}", headers = { ["content-type"] = "application/json" } } end
  if p == "/gone" then return { status = 410 } end
  if p == "/nothing" then return { status = 204 } end
  if p == "/odd" then return { status = 299 } end
end""")
    r = get(proxy.port, "/cookies")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "0", r.raw[:300]
    assert [v for n, v in r.headers if n == "Set-Cookie"] == ["a=1", "b=2"] and r.header("X-N") == "42"
    r = get(proxy.port, "/text")
    assert (r.status, r.reason, r.body) == (201, "Created", b"made\n"), r.raw[:300]
    assert r.header("Content-Type") == "text/plain; charset=utf-8" and r.header("Content-Length") == "5"
    r = get(proxy.port, "/json")
    assert r.body == b"{}" and r.header("Content-Type") == "application/json", r.raw[:300]
    assert [n.lower() for n, _ in r.headers].count("content-type") == 1
    r = get(proxy.port, "/gone")
    assert r.status == 410 and b"410 Gone" in r.body, r.raw[:300]
    r = get(proxy.port, "/gone", method="HEAD")
    assert r.status == 410 and r.body == b"" and int(r.header("Content-Length")) > 0, r.raw[:300]
    r = get(proxy.port, "/nothing")
    assert r.status == 204 and r.body == b"" and r.header("Content-Length") is None, r.raw[:300]
    r = get(proxy.port, "/odd")
    assert r.raw.startswith(b"HTTP/1.1 299 \r\n"), r.raw[:300]
    assert backend.total_hits == 0


# -- failures ------------------------------------------------------------------------

FAILING = """
pools = {{ app = {{ backends = {{ {app} }} }} }}
route_time_limit = 0.05
local function spin() local n = 0 while true do n = n + 1 end end
function route(req)
  local p = req.path
  if p == "/error" then error("boom") end
  if p == "/index" then return req.nothing.here end
  if p == "/number" then return 42 end
  if p == "/true" then return true end
  if p == "/function" then return print end
  if p == "/no-pool" then return "nope" end
  if p == "/no-status" then return {{ body = "x" }} end
  if p == "/status-string" then return {{ status = "200" }} end
  if p == "/status-99" then return {{ status = 99 }} end
  if p == "/status-600" then return {{ status = 600 }} end
  if p == "/status-frac" then return {{ status = 200.5 }} end
  if p == "/bad-name" then return {{ status = 200, headers = {{ ["a b"] = "x" }} }} end
  if p == "/injection" then return {{ status = 200, headers = {{ ["X-A"] = "a\\r\\nSet-Cookie: evil=1" }} }} end
  if p == "/nul" then return {{ status = 200, headers = {{ ["X-A"] = "a\\0b" }} }} end
  if p == "/length" then return {{ status = 200, headers = {{ ["Content-Length"] = "1" }} }} end
  if p == "/connection" then return {{ status = 200, headers = {{ connection = "keep-alive" }} }} end
  if p == "/two-locations" then return {{ status = 302, location = "/a", headers = {{ Location = "/b" }} }} end
  if p == "/body-204" then return {{ status = 204, body = "x" }} end
  if p == "/location-number" then return {{ status = 302, location = 5 }} end
  if p == "/body-table" then return {{ status = 200, body = {{}} }} end
  if p == "/yield" then coroutine.yield() end
  if p == "/loop" then while true do end end
  if p == "/loop-in-pcall" then while true do pcall(function() while true do end end) end end
  if p == "/loop-in-helper" then spin() end
  if p == "/loop-in-gsub" then return ("abc"):gsub(".", function() while true do end end) end
  return "app"
end
"""

FAILURES = ["/error", "/index", "/number", "/true", "/function", "/no-pool", "/no-status",
            "/status-string", "/status-99", "/status-600", "/status-frac", "/bad-name", "/injection",
            "/nul", "/length", "/connection", "/two-locations", "/body-204", "/location-number",
            "/body-table", "/yield", "/loop", "/loop-in-pcall", "/loop-in-helper", "/loop-in-gsub"]


@pytest.mark.stage(7)
def test_every_failure_costs_one_request_a_500(start_proxy, tmp_path, backend):
    """Each failure gets rsp's 500 page; the next request is served; the
    teardown check sees the proxy alive, without crash or fd leak."""
    proxy = start(start_proxy, tmp_path, FAILING.format(app=hp(backend)))
    for path in FAILURES:
        r = get(proxy.port, path)
        assert r.status == 500, (path, r.raw[:300])
        assert r.reason == "Internal Server Error" and r.header("Connection") == "close"
        assert b"route function failed" in r.body
        assert b"evil" not in r.raw
        ok = get(proxy.port, "/echo")
        assert ok.status == 200 and ok.header("X-Backend") == "a", (path, ok.raw[:300])
    assert backend.hits["/echo"] == len(FAILURES) and backend.total_hits == len(FAILURES)


@pytest.mark.stage(7)
def test_failures_are_logged_with_reason_and_traceback(start_proxy, tmp_path, backend):
    proxy = start(start_proxy, tmp_path, FAILING.format(app=hp(backend)))
    for path in ("/error", "/no-pool", "/injection", "/loop-in-helper"):
        assert get(proxy.port, path).status == 500
    log = proxy.stderr()
    assert ".lua:8: boom\nstack traceback:" in log, log  # line 8: listen, then a blank line
    assert 'route returned "nope", which is not the name of a pool' in log, log
    assert "header 'X-A' has a control character" in log, log
    assert re.search(r"route ran past its time limit \(0\.05 s; stopped after 0\.\d{3} s\)\nstack traceback:", log), log
    assert "in function 'spin'" in log, log  # where it was stopped
    # Inside a call from C the hook cannot yield; the log still says why.
    assert get(proxy.port, "/loop-in-gsub").status == 500
    assert re.search(r"route ran past its time limit \(0\.05 s; stopped after \d+\.\d{3} s\): ", proxy.stderr()), \
        proxy.stderr()


@pytest.mark.stage(7)
def test_time_limit_holds_for_a_hot_loop_many_times(start_proxy, tmp_path, backend):
    """A loop hot enough for LuaJIT to compile it, run again and again: the
    limit must hold every time (with the compiler on it would not)."""
    proxy = start(start_proxy, tmp_path, FAILING.format(app=hp(backend)))
    for _ in range(5):
        assert get(proxy.port, "/loop-in-pcall").status == 500
        assert get(proxy.port, "/loop").status == 500
    assert get(proxy.port, "/echo").status == 200


# -- config errors ---------------------------------------------------------------------

@pytest.mark.stage(7)
@pytest.mark.parametrize("body, setting", [
    ("route = 42", "route"),
    ('route = "app"', "route"),
    ("pools = 5", "pools"),
    ('pools = { ["my pool"] = { backends = { "127.0.0.1:1" } } }', "pools"),
    ('pools = { { backends = { "127.0.0.1:1" } } }', "pools"),
    ("pools = { app = { } }", "pools.app.backends"),
    ('pools = { app = "127.0.0.1:1" }', "pools.app"),
    ('pools = { app = { backends = { "127.0.0.1:1" }, balance = "random" } }', "pools.app.balance"),
    ('sites = { ["a.example"] = { pool = "missing" } }', 'sites["a.example"].pool'),
    ('pools = { app = { backends = { "127.0.0.1:1" } } }\n'
     'sites = { ["a.example"] = { pool = "app", backends = { "127.0.0.1:2" } } }', 'sites["a.example"]'),
    ('sites = { ["a.example"] = { pool = 1 } }', 'sites["a.example"].pool'),
    ("function route() end\nroute_time_limit = 0", "route_time_limit"),
    ("function route() end\nroute_time_limit = 100", "route_time_limit"),
    ("pools = { app = { backends = { \"127.0.0.1:1\" } } }", "backends"),
], ids=["route-number", "route-string", "pools-number", "pool-name-space", "pool-list", "pool-empty",
        "pool-string", "pool-balance", "site-missing-pool", "site-pool-and-backends", "site-pool-number",
        "time-limit-0", "time-limit-100", "pools-alone"])
def test_config_errors(rsp, tmp_path, body, setting):
    """Exit status 1, one line naming the file and the setting."""
    path = write_config(tmp_path, free_port(), body)
    line = assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, words=[f"'{setting}"])
    assert line.startswith(f"rsp: {path}: "), line


@pytest.mark.stage(7)
def test_route_only_config_and_startup_log(start_proxy, tmp_path):
    """A config with only route (no backends, no sites) answers by itself;
    the log names the pools and the time limit."""
    proxy = start(start_proxy, tmp_path, """
pools = { spare = { backends = { "127.0.0.1:1", "127.0.0.1:2" }, balance = "least_conn" } }
function route(req) return { status = 200, body = "hello from Lua\\n" } end""")
    r = get(proxy.port, "/")
    assert r.status == 200 and r.body == b"hello from Lua\n", r.raw[:300]
    log = proxy.stderr()
    assert "pool spare: 2 backends, least_conn" in log, log
    assert "route(req) chooses for every request (time limit 0.1 s)" in log, log
