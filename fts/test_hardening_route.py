"""Hardening of route(req) (stage 07 on): a time limit route cannot switch
off, a log line for a call that overran its limit inside one long C call,
and three small things about what route sees and answers (205 without
content, Cookie headers joined with "; ", an empty list of header values
refused).

The time limit relies on LuaJIT's interpreter checking a count hook: the
config must not reach the JIT compiler (jit.on() would compile a hot loop
into machine code, which no hook interrupts) nor debug.sethook (which
removes the hook). Sockets have a timeout only to detect a hang; no
duration is asserted (the slow string.match below is made to take far
longer than its 0.01 s limit, and nothing depends on how much longer)."""

import re

import pytest

from backends import record_request
from checks import assert_rsp_page
from test_lua_routing import ask, backend_of, body_of, wait_for_log


# -- jit and debug.sethook are out of reach ----------------------------------------

PROBE = r"""
local function probe()
  local loaded = package and package.loaded
  return table.concat({ tostring(jit), tostring(loaded and loaded.jit), tostring(pcall(require, "jit")),
                        tostring(debug and debug.sethook), tostring(pcall(require, "ffi")),
                        tostring(package and package.loadlib) }, ",")
end
local at_load = probe()
function route(req) return { status = 200, body = at_load .. "|" .. probe() } end
"""


@pytest.mark.stage(7)
def test_jit_and_sethook_are_not_reachable(start_proxy):
    """While the config file runs and inside route: the global jit is nil,
    package.loaded.jit is nil, require("jit") fails, debug.sethook is nil;
    and neither require("ffi") nor package.loadlib reach C code."""
    proxy = start_proxy(route=PROBE)
    assert body_of(ask(proxy.port, "/")) == "nil,nil,false,nil,false,nil|nil,nil,false,nil,false,nil"


ESCAPES = r"""
function route(req)
  local p = req.path
  if p == "/jit-on" then pcall(function() jit.on() end) while true do end end
  if p == "/require-jit" then pcall(function() require("jit").on() end) while true do end end
  if p == "/loaded-jit" then pcall(function() package.loaded.jit.on() end) while true do end end
  if p == "/unhook" then pcall(function() debug.sethook() end) while true do end end
  return "app"
end
"""


@pytest.mark.stage(7)
@pytest.mark.parametrize("path", ["/jit-on", "/require-jit", "/loaded-jit", "/unhook"])
def test_route_cannot_switch_the_time_limit_off(backend, start_proxy, path):
    """A route that tries to switch the JIT compiler back on (through the
    global jit, require or package.loaded) or to remove the hook
    (debug.sethook()) before an endless loop: the loop is still stopped,
    that request gets rsp's 500, the log says "route" and "time limit",
    and the next request is served; twice. (Where the escape works, the
    loop runs for ever and rsp serves nobody again: the client's read
    times out.)"""
    proxy = start_proxy(pools={"app": [backend]}, route_time_limit=0.05, route=ESCAPES)
    for _ in range(2):
        since = len(proxy.stderr())
        r = ask(proxy.port, path)
        assert_rsp_page(r, 500, "Internal Server Error")
        wait_for_log(proxy, since, "route", "time limit")
        ok = ask(proxy.port, "/echo")
        assert ok.status == 200 and backend_of(ok) == "a", ok.raw[:300]
    assert backend.total_hits == 2


# One C call that backtracks for long: a*a*a*b against hundreds of a's
# (about 200^4/24 steps, a good part of a second here). The hook cannot
# stop it, as it looks only between virtual-machine instructions.
SLOW = r"""
function route(req)
  if req.path:find("^/slow/") then req.path:match(("a*"):rep(3) .. "b") end
  return "app"
end
"""
SLOW_TARGET = "/slow/" + "a" * 200


@pytest.mark.stage(7)
def test_overrun_in_one_long_c_call_is_logged(make_raw_backend, start_proxy):
    """route_time_limit = 0.01 and a route that spends far longer in one
    string.match call, then returns a pool: the request is served as
    usual (the limit cannot cut a C call), and rsp's log gets a line
    about route that says how long it took and what the limit is."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(pools={"app": [recorder]}, route_time_limit=0.01, route=SLOW)
    since = len(proxy.stderr())
    r = ask(proxy.port, SLOW_TARGET)
    assert r.status == 200 and backend_of(r) == "recorder", r.raw[:300]
    log = wait_for_log(proxy, since, "route", "took", "time limit")
    lines = [line for line in log.splitlines() if "route" in line and "took" in line and "time limit" in line]
    assert lines, f"no single line says route took longer than its time limit:\n{log}"
    assert re.search(r"\b0\.010*\b|\b10 ?ms\b", lines[0]), f"the line does not give the limit (0.01 s): {lines[0]}"
    assert backend_of(ask(proxy.port, "/fast")) == "recorder"


# -- small things --------------------------------------------------------------------

SMALL = r"""
function route(req)
  local p = req.path
  if p == "/205-with-body" then return { status = 205, body = "x" } end
  if p == "/205" then return { status = 205 } end
  if p == "/headers" then
    return { status = 200, body = tostring(req.headers.cookie) .. "|" .. tostring(req.headers["x-multi"]) }
  end
  if p == "/empty-content-type" then return { status = 200, body = "x", headers = { ["Content-Type"] = {} } } end
  if p == "/empty-list" then return { status = 200, headers = { ["X-Empty"] = {} } } end
  return "app"
end
"""


@pytest.fixture
def small(backend, start_proxy):
    return start_proxy(pools={"app": [backend]}, route=SMALL)


@pytest.mark.stage(7)
def test_205_reset_content_has_no_content(small):
    """205 Reset Content has no content (RFC 9110, section 15.3.6):
    nothing follows the head, and a Content-Length, if any, is 0. A body
    given with it is a mistake in route's answer, like one with 204 or
    304: rsp's 500, a log line about the body, and never a 205 with
    content."""
    r = ask(small.port, "/205")
    assert r.status == 205 and r.header("X-Backend") is None, r.raw[:300]
    assert r.body == b"", f"content after the head of a 205: {r.body[:100]!r}"
    assert r.header("Content-Length") in (None, "0"), r.headers
    assert r.header("Connection") == "close" and not r.reset, r.raw[:300]
    since = len(small.stderr())
    r = ask(small.port, "/205-with-body")
    assert_rsp_page(r, 500, "Internal Server Error")
    wait_for_log(small, since, "route", "body")


@pytest.mark.stage(7)
def test_repeated_cookie_headers_joined_with_semicolon(small):
    """Cookie headers sent several times reach route as one value joined
    with "; " (RFC 9110, section 5.3: cookies are not a comma list); other
    repeated headers are still joined with ", "."""
    r = ask(small.port, "/headers", headers=[("Cookie", "a=1"), ("X-Multi", "one"), ("cookie", "b=2"),
                                             ("X-Multi", "two"), ("COOKIE", "c=3; d=4")])
    assert body_of(r) == "a=1; b=2; c=3; d=4|one, two"
    assert body_of(ask(small.port, "/headers", headers=[("Cookie", "a=1")])) == "a=1|nil"


@pytest.mark.stage(7)
@pytest.mark.parametrize("path, header", [("/empty-content-type", "Content-Type"), ("/empty-list", "X-Empty")])
def test_empty_list_of_header_values_is_an_error(small, path, header):
    """A header given an empty list of values in a response table is a
    mistake in route's answer (not a header left out): that request gets
    rsp's 500, the log names the header, and the next request is served."""
    since = len(small.stderr())
    assert_rsp_page(ask(small.port, path), 500, "Internal Server Error")
    wait_for_log(small, since, "route", header)
    ok = ask(small.port, "/echo")
    assert ok.status == 200 and backend_of(ok) == "a", ok.raw[:300]
