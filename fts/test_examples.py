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
    path = tmp_path / name
    path.write_text(text)
    return path, port


@pytest.mark.stage(6)
@pytest.mark.parametrize("name", sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".lua")))
def test_example_config_serves(name, tmp_path, backend, start_proxy):
    """Each example config starts rsp and proxies a request to its backend."""
    path, port = example_on_test_ports(name, tmp_path, backend)
    proxy = start_proxy(args=[str(path)], port=port)
    r = get(proxy.port, "/echo")
    assert r.status == 200, r.raw[:300]
    assert r.header("X-Backend") == backend.name
