"""The stage 05 config file (listen, backends, balance, down_time): every
mistake is refused at startup with exit status 1 and one line naming the
file and the setting; valid files, up to the limits, start a proxy.
(The stage 03-04 format is tested in test_cli_and_config.py, and so is the
command line.)"""

import socket

import pytest

from checks import assert_config_error
from client import get
from netutil import LOOPBACK, closed_ports, free_port
from proxy import lua_config, lua_string, lua_value, run_rsp, stage3_settings, stage5_settings



def settings(**changes):
    """A valid stage 05 config with some settings changed (name = Lua
    source text of the value; None removes the setting)."""
    return lua_config(stage5_settings(free_port(), [(LOOPBACK, free_port())]), changes)


def backends(*entries):
    """Lua text of a backends list."""
    return lua_value(list(entries))


def distinct_backends(count):
    return backends(*(f"127.0.0.1:{10000 + i}" for i in range(count)))


# (id, config text or None for a missing file, setting the message must name or None)
CONFIG_ERRORS = [
    ("missing-file", None, None),
    ("syntax-error", settings() + "listen = = 8000\n", None),
    ("runtime-error", 'error("boom")\n' + settings(), None),
    ("runtime-error-not-a-string", settings() + "error({})\n", None),
    ("call-nil", settings() + "notAFunction()\n", None),
    # listen
    ("listen-missing", settings(listen=None), "listen"),
    ("stage-03-globals-only", lua_config(stage3_settings(free_port(), (LOOPBACK, free_port()))), "listen"),
    ("listen-missing-metatable-on-globals",
     'setmetatable(_G, { __index = function(_, name) error("no global " .. name) end })\n'
     + settings(listen=None), "listen"),
    ("listen-boolean", settings(listen="true"), "listen"),
    ("listen-table", settings(listen="{}"), "listen"),
    ("listen-0", settings(listen="0"), "listen"),
    ("listen-negative", settings(listen="-1"), "listen"),
    ("listen-70000", settings(listen="70000"), "listen"),
    ("listen-fraction", settings(listen="8000.5"), "listen"),
    ("listen-string-70000", settings(listen='"70000"'), "listen"),
    ("listen-bogus", settings(listen='"bogus"'), "listen"),
    ("listen-port-99999", settings(listen='"1.2.3.4:99999"'), "listen"),
    ("listen-no-port", settings(listen='"127.0.0.1:"'), "listen"),
    ("listen-ipv6-without-brackets", settings(listen='"::1:8000"'), "listen"),
    ("listen-zero-byte", settings(listen='"8000\\0"'), "listen"),
    # backends
    ("backends-missing", settings(backends=None), "backends"),
    ("backends-string", settings(backends=lua_string("127.0.0.1:8001")), "backends"),
    ("backends-number", settings(backends="8001"), "backends"),
    ("backends-empty", settings(backends="{}"), "backends"),
    ("backends-entry-number", settings(backends="{ 8001 }"), "backends"),
    ("backends-entry-table", settings(backends='{ { host = "127.0.0.1", port = 8001 } }'), "backends"),
    ("backends-no-colon", settings(backends=backends("nocolon")), "backends"),
    ("backends-no-host", settings(backends=backends(":8001")), "backends"),
    ("backends-port-0", settings(backends=backends("127.0.0.1:0")), "backends"),
    ("backends-port-70000", settings(backends=backends("127.0.0.1:70000")), "backends"),
    ("backends-port-not-a-number", settings(backends=backends("127.0.0.1:http")), "backends"),
    ("backends-unresolvable", settings(backends=backends("nosuchhost.invalid:80")), "backends"),
    ("backends-ipv6-without-brackets", settings(backends=backends("::1:80")), "backends"),
    ("backends-listed-twice", settings(backends=backends("127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8001")),
     "backends"),
    ("backends-65-entries", settings(backends=distinct_backends(65)), "backends"),
    ("backends-zero-byte", settings(backends='{ "127.0.0.1:8001\\0" }'), "backends"),
    # balance
    ("balance-unknown", settings(balance='"random"'), "balance"),
    ("balance-number", settings(balance="1"), "balance"),
    ("balance-boolean", settings(balance="true"), "balance"),
    # down_time
    ("down_time-0", settings(down_time="0"), "down_time"),
    ("down_time-negative", settings(down_time="-1"), "down_time"),
    ("down_time-string", settings(down_time='"5"'), "down_time"),
    ("down_time-100000", settings(down_time="100000"), "down_time"),
    ("down_time-nan", settings(down_time="0/0"), "down_time"),
    ("down_time-infinite", settings(down_time="1/0"), "down_time"),
]


@pytest.mark.stage(5)
@pytest.mark.parametrize("text, setting", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_config(rsp, tmp_path, text, setting):
    """A config rsp cannot use makes it exit with status 1 and exactly one
    line on stderr, starting with "rsp: ", naming the file and (for a bad
    setting) the setting, in quotes."""
    path = tmp_path / "site.lua"
    if text is not None:
        path.write_text(text)
    assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, setting)


@pytest.mark.stage(5)
def test_config_with_every_setting(make_backend, start_proxy, tmp_path):
    """A config that sets everything, computed by Lua the way an operator
    might (a loop building the list, a name that needs resolving, listen
    as "ADDRESS:PORT"), starts and serves through both backends in turn."""
    a, b = make_backend("a"), make_backend("b")
    port = free_port()
    path = tmp_path / "full.lua"
    path.write_text(f"""-- every setting rsp knows
local ports = {{ {a.port}, {b.port} }}
listen = "127.0.0.1:" .. {port}
backends = {{}}
for i, p in ipairs(ports) do
    backends[#backends + 1] = (i == 1 and "127.0.0.1" or "localhost") .. ":" .. p
end
balance = "least_conn"
down_time = 2.5
""")
    proxy = start_proxy(args=[str(path)], port=port)
    served = [get(proxy.port, "/echo").header("X-Backend") for _ in range(4)]
    assert sorted(served) == ["a", "a", "b", "b"], served
    assert served[0] != served[1]
    assert "least_conn" in proxy.stderr()


@pytest.mark.stage(5)
@pytest.mark.parametrize("listen", ["number", "string"])
def test_config_limits_accepted(backend, start_proxy, tmp_path, listen):
    """The largest values allowed are accepted: 64 backends (63 of them with
    nothing listening) and down_time = 86400; listen as a bare port, a
    number or a string, and balance = "round_robin" spelled out. Requests
    are served by the one backend that is up."""
    entries = [f"127.0.0.1:{p}" for p in closed_ports(63)] + [f"127.0.0.1:{backend.port}"]
    port = free_port()  # after closed_ports: never one of theirs
    path = tmp_path / "limits.lua"
    path.write_text(lua_config({
        "listen": str(port) if listen == "number" else lua_string(str(port)),
        "backends": backends(*entries),
        "balance": lua_string("round_robin"),
        "down_time": "86400",
    }))
    proxy = start_proxy(args=[str(path)], port=port)
    for _ in range(3):
        r = get(proxy.port, "/echo")
        assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    assert backend.hits["/echo"] == 3


@pytest.mark.stage(5)
def test_listen_port_in_use(rsp, tmp_path):
    """A valid config whose listening port is taken makes rsp exit with
    status 1 and a message naming the port, instead of running deaf."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "taken.lua"
        path.write_text(lua_config(stage5_settings(port, [(LOOPBACK, free_port())])))
        result = run_rsp(rsp, [str(path)], tmp_path)
    assert result.returncode == 1, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert str(port) in result.stderr, result.stderr
