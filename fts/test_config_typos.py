"""A misspelt setting must not be ignored in silence (stage 07 on).

Inside a pool or a site table every field is known, so a stray one is an
error naming the table and the field. At the top level a script may keep
globals of its own (helpers, shared lists), so a global rsp does not read
is fine, unless it is a letter or two away from a setting: then rsp starts
but warns, naming the setting it probably meant."""

import pytest

from checks import assert_config_error
from client import get
from netutil import free_port
from proxy import run_rsp

WWW = 'sites["www.example.com"]'


def config_text(port, *lines):
    return "\n".join([f'listen = "127.0.0.1:{port}"', *lines]) + "\n"


@pytest.mark.stage(7)
@pytest.mark.parametrize("text, setting, field", [
    ('pools = { app = { backends = { "127.0.0.1:8001" }, balanse = "least_conn" } }', "pools.app", "balanse"),
    ('sites = { ["www.example.com"] = { backends = { "127.0.0.1:8001" }, pol = "x" } }', WWW, "pol"),
    ('pools = { app = { backends = { "127.0.0.1:8001" } } }\n'
     'sites = { ["www.example.com"] = { pool = "app", weight = 2 } }', WWW, "weight"),
], ids=["pool-field", "site-field", "site-with-pool-field"])
def test_unknown_field_is_an_error(rsp, tmp_path, text, setting, field):
    """A field a pool or a site does not have: exit status 1, one line
    naming the file, the table and the field."""
    path = tmp_path / "typo.lua"
    path.write_text(config_text(free_port(), text))
    line = assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, setting, words=[f"'{field}'"])
    assert line.startswith(f"rsp: {path}: "), line


@pytest.mark.stage(7)
def test_misspelt_global_is_warned_about_and_rsp_runs(backend, start_proxy, tmp_path):
    """`balence` and `Listen` get a warning naming the setting they are
    close to; a helper global far from every setting gets none; rsp still
    starts and serves."""
    port = free_port()
    path = tmp_path / "typo.lua"
    path.write_text(config_text(port, f'backends = {{ "127.0.0.1:{backend.port}" }}',
                                'balence = "least_conn"', "Listen = 1",
                                'my_upstream_list = { "a", "b" }'))
    proxy = start_proxy(args=[str(path)], port=port)
    assert get(proxy.port, "/echo").status == 200
    stderr = proxy.stderr()
    assert f"rsp: {path}: warning: 'balence' is not a setting; did you mean 'balance'?" in stderr, stderr
    assert f"rsp: {path}: warning: 'Listen' is not a setting; did you mean 'listen'?" in stderr, stderr
    assert "my_upstream_list" not in stderr, stderr
