"""A real PHP application nobody here wrote, behind rsp (stage 23, issue
32): Debian's DokuWiki (flat files, no database) in a temporary root,
run by php-fpm8.2 (started by the test, as in test_fastcgi.py) and driven
through rsp by a client that keeps DokuWiki's cookies: the start page,
a login through its form, the edit form, a save POSTed with the form's
security token (sectok; a wrong one is refused), the saved page read
back; a stylesheet and an image served by rsp as files (no PHP); the
wiki's pages and configuration not downloadable.

Layout: Debian splits DokuWiki over /usr/share/dokuwiki (the code),
/etc/dokuwiki (the configuration) and /var/lib/dokuwiki (the pages, and
the plugins and template /usr/share/dokuwiki/lib links to). rsp reads no
.htaccess, so nothing inside root may be private: the test copies the
code (links followed) to tmp/wiki/www, the site's root, and puts conf/
(a copy of /etc/dokuwiki) and a fresh data/ beside it, outside root.
DokuWiki's own hook for that, inc/preload.php, names the conf directory
(DOKU_CONF); conf/local.php names the data directory (savedir). Skipped
with a clear message without the dokuwiki or php8.2-fpm packages."""

import hashlib
import html.parser
import os
import re
import shutil
import urllib.parse
import uuid

import pytest

from client import Conn
from test_fastcgi import PHP_FPM, PhpFpm

pytestmark = pytest.mark.stage(23)

DOKUWIKI = "/usr/share/dokuwiki"
DOKUWIKI_CONF = "/etc/dokuwiki"
DATA_DIRS = ("pages", "attic", "media", "media_attic", "media_meta", "meta", "cache", "index", "locks", "tmp",
             "log")
HOST = "wiki.test"
START_TEXT = "====== Welcome to the temporary wiki ======\n\nIt lives in a test's directory (start-5d1c).\n"
USER, PASSWORD = "editor", "correct horse 5d1c"
# What Debian's /etc/dokuwiki holds besides DokuWiki's configuration
# (web server snippets, and links to ACL files readable by www-data only).
NOT_CONF = {"apache.conf", "lighttpd.conf", "htaccess", ".htaccess", "acl.auth.php", "users.auth.php"}


class Wiki:
    """DokuWiki in dir: www/ (the code: rsp's root), conf/ and data/ (outside root)."""

    def __init__(self, dir):
        self.www = dir / "www"
        self.conf = dir / "conf"
        self.data = dir / "data"
        self.sessions = dir / "sessions"
        # Follows the links (lib/tpl, lib/plugins point into /var/lib/dokuwiki);
        # skips the .htaccess link to /etc (rsp does not read it).
        shutil.copytree(DOKUWIKI, self.www, symlinks=False, ignore=shutil.ignore_patterns(".htaccess*"))
        shutil.copytree(DOKUWIKI_CONF, self.conf, symlinks=True, ignore=lambda d, names: NOT_CONF & set(names))
        # A fresh data/ with the directories DokuWiki insists on (Debian's
        # /var/lib/dokuwiki/data is readable by www-data only).
        for sub in DATA_DIRS:
            (self.data / sub).mkdir(parents=True)
        self.sessions.mkdir()
        # Debian's preload.php names /etc/dokuwiki; this one names conf/ beside root.
        (self.www / "inc" / "preload.php").write_text(
            f"<?php\nif (!defined('DOKU_CONF')) define('DOKU_CONF', '{self.conf}/');\n")
        (self.conf / "local.php").write_text(
            "<?php\n"
            f"$conf['savedir'] = '{self.data}';\n"
            "$conf['title'] = 'rsp test wiki';\n"
            "$conf['useacl'] = 1;\n"
            "$conf['superuser'] = '@admin';\n")
        # Anyone reads, users edit: an edit needs a login, and DokuWiki gives
        # forms a security token (sectok) only for a logged-in user.
        (self.conf / "acl.auth.php").write_text("*\t@ALL\t1\n*\t@user\t8\n")
        # DokuWiki takes a 32-hex-digit hash as plain MD5: enough for a test user.
        password_hash = hashlib.md5(PASSWORD.encode()).hexdigest()
        (self.conf / "users.auth.php").write_text(f"{USER}:{password_hash}:Ed Itor:editor@wiki.test:user\n")
        (self.data / "pages" / "start.txt").write_text(START_TEXT)


@pytest.fixture
def wiki(tmp_path):
    if not os.path.isfile(f"{DOKUWIKI}/doku.php"):
        pytest.skip("DokuWiki is not installed (Debian's dokuwiki; setup-env.sh installs it)")
    if PHP_FPM is None:
        pytest.skip("php-fpm8.2 is not installed (Debian's php8.2-fpm; setup-env.sh installs it)")
    return Wiki(tmp_path / "wiki")


@pytest.fixture
def fpm_unix(tmp_path, wiki):
    server = PhpFpm(tmp_path, unix=True)
    yield server
    server.stop()


class Forms(html.parser.HTMLParser):
    """The forms of a page: forms[id] = {"action": ..., "fields": {name: value}}
    (inputs with a name, textareas, and the submit buttons' names)."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.forms = {}
        self.form = None
        self.textarea = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.form = {"action": a.get("action"), "fields": {}}
            self.forms[a.get("id")] = self.form
        elif self.form is not None and tag in ("input", "button") and a.get("name"):
            self.form["fields"][a["name"]] = a.get("value") or ""
        elif self.form is not None and tag == "textarea" and a.get("name"):
            self.textarea = a["name"]
            self.form["fields"][self.textarea] = ""

    def handle_data(self, data):
        if self.textarea is not None:
            self.form["fields"][self.textarea] += data

    def handle_endtag(self, tag):
        if tag == "textarea":
            self.textarea = None
        elif tag == "form":
            self.form = None


class Browser:
    """One keep-alive connection to rsp as HOST, with a cookie jar (name → value)."""

    def __init__(self, port):
        self.conn = Conn(port, host=HOST)
        self.cookies = {}

    def request(self, method, path, body=b"", headers=()):
        headers = list(headers)
        if self.cookies:
            headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items())))
        r = self.conn.request(method, path, headers=headers, body=body)
        assert r.status is not None and r.complete, f"{method} {path}: no whole response: {r!r}"
        for line in r.header_values("Set-Cookie"):
            name, _, value = line.split(";", 1)[0].partition("=")
            if value in ("", "deleted"):
                self.cookies.pop(name.strip(), None)
            else:
                self.cookies[name.strip()] = value
        return r

    def close(self):
        self.conn.close()


def page_text(r):
    return r.decoded.decode("utf-8", "replace")


def get_form(browser, path, form_id):
    """GETs path (200 expected) and returns its form form_id (see Forms)."""
    r = browser.request("GET", path)
    text = page_text(r)
    assert r.status == 200, f"GET {path}: status {r.status}: {text[:500]!r}"
    form = Forms(text).forms.get(form_id)
    assert form is not None, f"GET {path}: no form {form_id}: {text[:1000]!r}"
    return form


def submit(browser, form, button, **changes):
    """POSTs form (urlencoded, to its action) with changes and only the submit button `button`."""
    fields = {k: v for k, v in form["fields"].items() if not k.startswith("do[")}
    fields.update(changes)
    fields[button] = form["fields"].get(button) or "1"
    action = urllib.parse.urlsplit(form["action"] or "/doku.php")
    target = action.path + (f"?{action.query}" if action.query else "")
    return browser.request("POST", target, body=urllib.parse.urlencode(fields).encode(),
                           headers=[("Content-Type", "application/x-www-form-urlencoded")])


def wiki_site(start_proxy, wiki, fpm):
    """rsp with the site HOST: files from wiki.www, doku.php its front controller."""
    return start_proxy(sites={HOST: {"root": str(wiki.www), "fastcgi": {
        "backends": [fpm.address], "index": "doku.php",
        # php-fpm honours PHP_VALUE: the wiki's sessions stay in the test's directory.
        "params": {"PHP_VALUE": f"session.save_path={wiki.sessions}"}}}})


def test_dokuwiki_start_page_edit_and_read_back(start_proxy, wiki, fpm_unix):
    """GET / runs doku.php (root's index) and shows the start page; a login
    through DokuWiki's form; the edit form's save, POSTed with its sectok
    and the session cookies, writes the page under data/ (outside root),
    while the same save with a wrong sectok does not; the page read back
    has the new text."""
    proxy = wiki_site(start_proxy, wiki, fpm_unix)
    marker = f"saved-through-rsp-{uuid.uuid4().hex[:12]}"
    page = wiki.data / "pages" / "start.txt"
    browser = Browser(proxy.port)
    try:
        r = browser.request("GET", "/")
        text = page_text(r)
        assert r.status == 200, f"GET /: status {r.status}: {text[:500]!r}"
        assert "Welcome to the temporary wiki" in text and "start-5d1c" in text, \
            f"GET / is not DokuWiki's start page: {text[:500]!r}"
        assert "rsp test wiki" in text, "the title from conf/local.php (outside root) is not on the page"
        assert browser.cookies, f"DokuWiki set no session cookie: {r.headers}"

        login = get_form(browser, "/doku.php?id=start&do=login", "dw__login")
        r = submit(browser, login, "do[login]", do="login", u=USER, p=PASSWORD)
        assert r.status == 302 and r.header("Location") == f"http://{HOST}/doku.php?id=start", \
            f"the login: status {r.status}, Location {r.header('Location')!r}: {page_text(r)[:500]!r}"
        edit = get_form(browser, "/doku.php?id=start&do=edit", "dw__editform")
        fields = edit["fields"]
        assert fields.get("sectok"), f"the edit form has no security token (not logged in?): {fields}"
        assert "start-5d1c" in fields.get("wikitext", ""), f"the form's text is not the page's: {fields}"

        new_text = f"====== Edited ======\n\nThis page was {marker}.\n"
        r = submit(browser, edit, "do[save]", wikitext=new_text, summary="forged", sectok="0" * 32)
        assert r.status == 200 and marker not in page.read_text(), \
            f"a save with a wrong sectok was taken (status {r.status}): {page.read_text()!r}"

        r = submit(browser, edit, "do[save]", wikitext=new_text, summary="an edit through rsp")
        # DokuWiki redirects to the page it saved (PHP's Location: makes it a 302).
        assert r.status == 302 and r.header("Location") == f"http://{HOST}/doku.php?id=start", \
            f"the save: status {r.status}, Location {r.header('Location')!r}: {page_text(r)[:500]!r}"
        saved = page.read_text()
        assert marker in saved, f"data/pages/start.txt does not hold the saved text: {saved!r}"

        r = browser.request("GET", "/doku.php?id=start")
        text = page_text(r)
        assert r.status == 200, f"the page read back: status {r.status}: {text[:500]!r}"
        assert f"This page was {marker}." in text, f"the page read back lacks the marker {marker}"
        assert re.search(r"<h1[^>]*>\s*Edited\s*</h1>", text), "the saved heading is not rendered as <h1>"
        assert "start-5d1c" not in text, "the page read back still shows the old text"
    finally:
        browser.close()


def test_dokuwiki_files_and_private_data(start_proxy, wiki, fpm_unix):
    """The template's image and a stylesheet come from rsp as files, byte
    for byte; paths naming the wiki's pages or configuration reach no file
    (conf/ and data/ are outside root): DokuWiki's front controller answers,
    never the file's bytes; doku.php and lib/exe/css.php run, never download."""
    proxy = wiki_site(start_proxy, wiki, fpm_unix)
    with Conn(proxy.port, host=HOST) as c:
        for path, kind in (("/lib/tpl/dokuwiki/images/logo.png", "image/png"),
                           ("/lib/styles/screen.css", "text/css")):
            r = c.get(path)
            assert r.status == 200, f"GET {path}: status {r.status}"
            assert r.decoded == (wiki.www / path.lstrip("/")).read_bytes(), f"GET {path}: not the file's bytes"
            assert (r.header("Content-Type") or "").startswith(kind), \
                f"GET {path}: Content-Type {r.header('Content-Type')!r}, not {kind} (served as a file?)"
            assert r.header("X-Powered-By") is None and r.header("Set-Cookie") is None, \
                f"GET {path}: PHP answered, not rsp's file producer: {r.headers}"

        private = {"/data/pages/start.txt": START_TEXT, "/pages/start.txt": START_TEXT,
                   "/conf/local.php": "savedir", "/local.php": "savedir"}
        for path, content in private.items():
            r = c.get(path)
            text = page_text(r)
            assert content not in text, f"GET {path} served the private file: {text[:300]!r}"
            assert "<html" in text.lower() and "dokuwiki" in text.lower(), \
                f"GET {path}: not DokuWiki's front controller (status {r.status}): {text[:300]!r}"

        # Scripts run, never download: the front script, and lib/exe/css.php
        # (DokuWiki's stylesheet builder, run as itself: it exists).
        r = c.get("/doku.php")
        assert r.status == 200 and b"<?php" not in r.decoded, f"GET /doku.php: {r!r} {r.decoded[:200]!r}"
        r = c.get("/lib/exe/css.php")
        assert r.status == 200 and (r.header("Content-Type") or "").startswith("text/css"), \
            f"GET /lib/exe/css.php: status {r.status}, Content-Type {r.header('Content-Type')!r}"
        assert b"<?php" not in r.decoded and b"{" in r.decoded, f"GET /lib/exe/css.php: {r.decoded[:200]!r}"
