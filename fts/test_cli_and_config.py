"""Starting rsp: wrong command lines and bad config files are refused
with a clear message and a meaningful exit status."""


import pytest

from checks import assert_config_error
from client import get
from netutil import free_port
from proxy import lua_config, run_rsp, stage3_settings



def assert_usage_error(result):
    assert result.returncode == 2, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert "usage:" in result.stderr


# -- command line --------------------------------------------------------------

@pytest.mark.stage(1, 2)
@pytest.mark.parametrize("args", [
    [],
    ["{port}", "127.0.0.1"],
    ["{port}", "127.0.0.1", "80", "extra", "more"],
    ["http", "127.0.0.1", "80"],
    ["{port}", "127.0.0.1", "http"],
    ["0", "127.0.0.1", "80"],
    ["{port}", "127.0.0.1", "0"],
    ["70000", "127.0.0.1", "80"],
    ["{port}", "127.0.0.1", "70000"],
], ids=["no-args", "two-args", "five-args", "listen-port-not-a-number", "backend-port-not-a-number",
        "listen-port-0", "backend-port-0", "listen-port-70000", "backend-port-70000"])
def test_bad_command_line(rsp, tmp_path, args):
    """rsp LISTEN_PORT BACKEND_HOST BACKEND_PORT: anything else exits with
    status 2 and a usage message on stderr."""
    port = str(free_port())
    assert_usage_error(run_rsp(rsp, [a.format(port=port) for a in args], tmp_path))


@pytest.mark.stage(3)
@pytest.mark.parametrize("args", [[], ["a.lua", "b.lua"]], ids=["no-args", "two-args"])
def test_bad_command_line_config_stages(rsp, tmp_path, args):
    """rsp CONFIG.lua: no argument or two arguments exit with status 2 and
    a usage message on stderr."""
    assert_usage_error(run_rsp(rsp, args, tmp_path))


# -- config file (stages 03-04; stage 05 changes the format) ----------------------

def settings(**changes):
    """Valid stage 03 settings with some changed; None removes a setting."""
    return lua_config(stage3_settings(free_port(), ("127.0.0.1", free_port())), changes)


# (id, config file text or None for a missing file, setting the message must name)
CONFIG_ERRORS = [
    ("missing-file", None, None),
    ("syntax-error", settings() + "listenPort = = 8080\n", None),
    ("runtime-error", 'error("boom")\n' + settings(), None),
    ("call-nil", settings() + "notAFunction()\n", None),
    ("missing-listenPort", settings(listenPort=None), "listenPort"),
    ("missing-backendAddress", settings(backendAddress=None), "backendAddress"),
    ("missing-backendPort", settings(backendPort=None), "backendPort"),
    ("listenPort-boolean", settings(listenPort="true"), "listenPort"),
    ("backendPort-table", settings(backendPort="{}"), "backendPort"),
    ("listenPort-not-a-number", settings(listenPort='"abc"'), "listenPort"),
    ("listenPort-too-large", settings(listenPort="70000"), "listenPort"),
    ("backendPort-too-large", settings(backendPort="70000"), "backendPort"),
    ("backendAddress-number", settings(backendAddress="42"), "backendAddress"),
]


@pytest.mark.stage(3, 4)
@pytest.mark.parametrize("text, setting", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_config(rsp, tmp_path, text, setting):
    """A config rsp cannot use makes it exit with status 1 and exactly one
    line on stderr, starting with "rsp: ", naming the file and (for a bad
    setting) the setting."""
    path = tmp_path / "site.lua"
    if text is not None:
        path.write_text(text)
    assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, setting, quoted=False)


@pytest.mark.stage(3, 4)
def test_config_ports_as_strings(make_backend, start_proxy, tmp_path):
    """Ports may be given as strings in the config."""
    backend = make_backend()
    port = free_port()
    path = tmp_path / "strings.lua"
    path.write_text(settings(listenPort=f'"{port}"', backendPort=f'"{backend.port}"'))
    proxy = start_proxy(args=[str(path)], port=port)
    r = get(proxy.port, "/echo")
    assert r.status == 200
    assert r.json()["backend"] == backend.name
