"""The example configs in examples/ are the first thing an operator copies:
each must load in the current code and serve traffic. `make run`'s demo
config is checked end to end against a backend of ours."""

import os
import re

import pytest

from client import get
from netutil import free_port

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def example_on_test_ports(name, tmp_path, backend):
    """The example's text with its listen setting moved to a free port and
    every backend pointed at `backend`, written into tmp_path."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    port = free_port()
    # Lists of several backends become one entry (a list may not name the
    # same backend twice), then every backend is ours.
    text = re.sub(r'(?:"127\.0\.0\.1:\d+",?(?:\s*--[^\n]*)?\s*){2,}', '"127.0.0.1:1" ', text)
    text = re.sub(r'"127\.0\.0\.1:\d+"', f'"127.0.0.1:{backend.port}"', text)
    text, n = re.subn(r'^listen = .*$', f'listen = "127.0.0.1:{port}"', text, flags=re.M)
    assert n == 1, f"{name} must set listen exactly once"
    # A status listener on a free port too: suites run side by side.
    text = re.sub(r'^status_listen = .*$', f'status_listen = "127.0.0.1:{free_port()}"', text, flags=re.M)
    path = tmp_path / name
    path.write_text(text)
    return path, port


# The first stage of each setting an example may set beyond stage 07's
# (checked latest first).
SETTING_STAGES = (
    (17, r"request_buffering|request_buffer_size|max_body_size|body_min_rate|temp_dir|"
         r"response_buffering|response_buffer_size|max_temp_file_size"),
    (16, r"splice"),
    (15, r"acme_webroot"),
    (14, r"tls"),
    (13, r"workers|reuseport"),
    (12, r"status_listen|status_public"),
    (11, r"access_log|access_log_format|user"),
    (10, r"shutdown_timeout"),
    (9, r"keepalive_timeout|keepalive_requests|backend_keepalive|backend_idle_timeout"),
    (8, r"\w+_timeout|health_check"),
)


def first_stage(name):
    """The stage an example needs: the first that knows every setting it
    sets (SETTING_STAGES), 07 if it defines a route function, else 06."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    for stage, names in SETTING_STAGES:
        if re.search(rf"^({names}) = ", text, flags=re.M):
            return stage
    return 7 if re.search(r"^function route\(", text, flags=re.M) else 6


@pytest.mark.stage(6)
@pytest.mark.parametrize("name", sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".lua")))
def test_example_config_serves(name, tmp_path, backend, start_proxy, rsp):
    """Each example config starts rsp and proxies a request to its backend."""
    if rsp.stage < first_stage(name):
        pytest.skip(f"{name} needs stage {first_stage(name):02d}")
    path, port = example_on_test_ports(name, tmp_path, backend)
    proxy = start_proxy(args=[str(path)], port=port)
    r = get(proxy.port, "/echo")
    assert r.status == 200, r.raw[:300]
    assert r.header("X-Backend") == backend.name


@pytest.mark.stage(7)
def test_routing_example_decides_as_its_comments_say(tmp_path, backend, start_proxy):
    """examples/routing.lua: example.com is redirected to www with path and
    query, /admin is refused to a client other than 127.0.0.1 and served to
    127.0.0.1, /static/ and the rest reach the backends."""
    path, port = example_on_test_ports("routing.lua", tmp_path, backend)
    proxy = start_proxy(args=[str(path)], port=port)
    hits = backend.total_hits

    r = get(proxy.port, "/a/../blog?x=1", host="Example.COM:8080", source="127.0.0.1")
    assert r.status == 301, r.raw[:300]
    assert r.header("Location") == "https://www.example.com/blog?x=1"
    r = get(proxy.port, "/admin/users", host="www.example.com", source="127.0.0.2")
    assert r.status == 403, r.raw[:300]
    assert backend.total_hits == hits, "rsp's own answers must not reach a backend"

    for source, target in (("127.0.0.1", "/admin/echo"), ("127.0.0.2", "/static/echo"),
                           ("127.0.0.2", "/echo")):
        r = get(proxy.port, target, host="www.example.com", source=source)  # any 127.x.y.z is ours
        # The backend answers 404 for paths other than /echo: its answer
        # all the same, as X-Backend shows.
        assert r.status == (200 if target == "/echo" else 404), (source, target, r.raw[:300])
        assert r.header("X-Backend") == backend.name
