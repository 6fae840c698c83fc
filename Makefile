# rsp -- top-level targets. See README.md.
#   make            build src/rsp
#   make stages     build every tutorial stage
#   make run        serve the demo site through rsp on http://localhost:8000
#   make test       ./run_integration_tests (every stage and src/)
#   make install    install rsp, its config, systemd unit, logrotate file, man
#                   pages and docs (PREFIX=/usr/local, DESTDIR=; see dist/, README.md)
#   make uninstall  remove them again, except /etc/rsp and the logs
#   make deb        build the Debian package rsp_VERSION_ARCH.deb (dist/debian/build)
#   make diffs      regenerate each stage's CHANGES.diff
#   make demos      build the stages and run every chapter's demos (tools/run-demos)
#   make asan       build src/ with AddressSanitizer + UBSan into build/asan/rsp
#                   (make -C stages/NN-name asan: that stage's, into its ./rsp-asan)
#   make fuzz       build the libFuzzer harnesses (fuzz/) and run each FUZZ_SECONDS
#   make fuzz-regressions   replay fuzz/regressions/ and the seed corpus once
#   make clean

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DOCDIR ?= $(PREFIX)/share/doc/rsp
MANDIR ?= $(PREFIX)/share/man
# The unit goes where systemd looks for units of that prefix: the
# distribution's directory for /usr (the Debian package), the
# administrator's /usr/local/lib/systemd/system for /usr/local (see
# systemd.unit(5)), and /etc/systemd/system for any other prefix, which
# systemd does not search.
ifeq ($(PREFIX),/usr)
UNITDIR ?= /lib/systemd/system
else ifeq ($(PREFIX),/usr/local)
UNITDIR ?= /usr/local/lib/systemd/system
else
UNITDIR ?= /etc/systemd/system
endif
EXAMPLES := $(sort $(wildcard examples/*.lua))
# What make install installs as rsp: make deb passes its release build.
INSTALL_BINARY ?= src/rsp
# Who owns /var/log/rsp when root installs: the `user` of dist/rsp.lua.
LOG_OWNER ?= www-data:adm
STAGES := $(sort $(wildcard stages/[0-9][0-9]-*))

# The sanitizer build: src/ is copied into build/asan and built there, so
# src/ itself (and its objects) are never touched. clang by default; gcc
# works too: rm -rf build/asan; make asan ASAN_CC=gcc.
ASAN_CC ?= clang
ASAN_DIR := build/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g -O1
FUZZ_SECONDS ?= 60

all: src/rsp

src/rsp: FORCE
	$(MAKE) -C src

stages: FORCE
	@set -e; for s in $(STAGES); do $(MAKE) -C $$s; done

run: src/rsp
	examples/run-demo

test:
	./run_integration_tests

# The config is installed only if there is none: an operator's is never
# overwritten (the example is always in $(DOCDIR)); both name $(DOCDIR),
# where the README and the examples go. The unit gets the real path of the
# binary. /var/lib/rsp/acme is tls.acme's default storage, which the unit
# lets rsp write (rsp, started as root, gives it to its `user`).
# /etc/rsp, /var/log/rsp and /var/lib/rsp stay on uninstall.
install: $(INSTALL_BINARY) dist/rsp.lua dist/rsp.service.in dist/rsp.logrotate dist/rsp.8 dist/rsp.lua.5
	install -D -m 0755 $(INSTALL_BINARY) $(DESTDIR)$(BINDIR)/rsp
	sed -e 's|/usr/share/doc/rsp|$(DOCDIR)|g' dist/rsp.lua | install -D -m 0644 /dev/stdin $(DESTDIR)$(DOCDIR)/rsp.lua.example
	@if [ -e $(DESTDIR)/etc/rsp/rsp.lua ]; then \
	  echo "$(DESTDIR)/etc/rsp/rsp.lua exists: left as it is (the example is $(DESTDIR)$(DOCDIR)/rsp.lua.example)"; \
	else \
	  echo "install -D -m 0644 $(DESTDIR)$(DOCDIR)/rsp.lua.example $(DESTDIR)/etc/rsp/rsp.lua"; \
	  install -D -m 0644 $(DESTDIR)$(DOCDIR)/rsp.lua.example $(DESTDIR)/etc/rsp/rsp.lua; \
	fi
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -d -m 0755 $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples/
	install -D -m 0644 dist/rsp.8 $(DESTDIR)$(MANDIR)/man8/rsp.8
	install -D -m 0644 dist/rsp.lua.5 $(DESTDIR)$(MANDIR)/man5/rsp.lua.5
	sed -e 's|@BINDIR@|$(BINDIR)|g' dist/rsp.service.in | install -D -m 0644 /dev/stdin $(DESTDIR)$(UNITDIR)/rsp.service
	install -D -m 0644 dist/rsp.logrotate $(DESTDIR)/etc/logrotate.d/rsp
	install -d -m 0755 $(DESTDIR)/var/log/rsp
	install -d -m 0700 $(DESTDIR)/var/lib/rsp/acme
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "chown $(LOG_OWNER) $(DESTDIR)/var/log/rsp"; \
	  chown $(LOG_OWNER) $(DESTDIR)/var/log/rsp || \
	    echo "make install: warning: $(DESTDIR)/var/log/rsp is root's: make it writable by rsp's user" >&2; \
	fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rsp $(DESTDIR)$(UNITDIR)/rsp.service $(DESTDIR)/etc/logrotate.d/rsp
	rm -f $(DESTDIR)$(MANDIR)/man8/rsp.8 $(DESTDIR)$(MANDIR)/man5/rsp.lua.5
	rm -f $(DESTDIR)$(DOCDIR)/rsp.lua.example $(DESTDIR)$(DOCDIR)/README.md
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(EXAMPLES))
	if [ -d $(DESTDIR)$(DOCDIR)/examples ]; then rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR)/examples; fi
	if [ -d $(DESTDIR)$(DOCDIR) ]; then rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR); fi

# The Debian package: a release build of src/ with Debian's hardening flags,
# `make install` into a staging root, then Debian's own parts (user rsp,
# conffiles, maintainer scripts, Depends from dpkg-shlibdeps). Needs
# dpkg-dev (in build-essential) besides the build's own packages:
# ./setup-env.sh --build installs exactly those.
DEB_DIR ?= .
deb: FORCE
	dist/debian/build $(DEB_DIR)

diffs:
	tools/stage-check --fix

# Builds the stages that have demos, then runs every demo (tools/run-demos).
demos: FORCE
	@set -e; for s in $(STAGES); do if [ -d $$s/demo ]; then $(MAKE) -s -C $$s; fi; done
	tools/run-demos

# cp -p keeps the sources' times, so only what changed in src/ is rebuilt.
# CFLAGS and LDFLAGS go in through the environment: src/Makefile appends its
# warning flags to them (on make's command line they would replace them).
asan: FORCE
	@mkdir -p $(ASAN_DIR)
	@rm -f $(ASAN_DIR)/*.[ch] $(ASAN_DIR)/Makefile
	cp -p src/*.c src/*.h src/Makefile $(ASAN_DIR)/
	CFLAGS='$(ASAN_FLAGS)' LDFLAGS='$(ASAN_FLAGS)' $(MAKE) -C $(ASAN_DIR) CC=$(ASAN_CC)

fuzz: FORCE
	$(MAKE) -k -C fuzz run FUZZ_SECONDS=$(FUZZ_SECONDS)

fuzz-regressions: FORCE
	$(MAKE) -k -C fuzz regressions

clean:
	$(MAKE) -C src clean
	$(MAKE) -C fuzz clean
	rm -rf build rsp_*.deb
	@set -e; for s in $(STAGES); do $(MAKE) -C $$s clean; done

FORCE:

.PHONY: all stages run test install uninstall deb diffs demos asan fuzz fuzz-regressions clean FORCE
