"""rsp in front of a real web server (nginx serving static files)."""

import pytest

from client import get
from pattern import assert_same_bytes


@pytest.fixture
def site_proxy(nginx, start_proxy):
    return start_proxy(nginx)


@pytest.mark.stage(1)
@pytest.mark.parametrize("name", ["index.html", "blob.bin"])
def test_static_file_same_as_direct(nginx, site_proxy, static_site, name):
    """A file served by nginx arrives through rsp exactly as nginx serves it
    directly (and as it is on disk)."""
    _, files = static_site
    direct = get(nginx.port, f"/{name}")
    proxied = get(site_proxy.port, f"/{name}")
    assert direct.status == 200
    assert proxied.status == 200
    assert_same_bytes(direct.body, files[name], "body served directly")
    assert_same_bytes(proxied.body, direct.body, "body served through rsp")
    assert proxied.header("Content-Type") == direct.header("Content-Type")


@pytest.mark.stage(1)
def test_index_page(site_proxy, static_site):
    """GET / through rsp gives nginx's index page."""
    _, files = static_site
    r = get(site_proxy.port, "/")
    assert r.status == 200
    assert r.body == files["index.html"]


@pytest.mark.stage(1)
def test_not_found_passed_through(site_proxy):
    """nginx's 404 for a missing file reaches the client as a 404."""
    assert get(site_proxy.port, "/no-such-file").status == 404
