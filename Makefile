# rsp -- top-level targets. See README.md.
#   make            build src/rsp
#   make stages     build every tutorial stage
#   make run        serve the demo site through rsp on http://localhost:8000
#   make test       ./run_integration_tests (every stage and src/)
#   make install    install src/rsp into $(DESTDIR)$(PREFIX)/bin
#   make diffs      regenerate each stage's CHANGES.diff
#   make clean

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
STAGES := $(sort $(wildcard stages/[0-9][0-9]-*))

all: src/rsp

src/rsp: FORCE
	$(MAKE) -C src

stages: FORCE
	@set -e; for s in $(STAGES); do $(MAKE) -C $$s; done

run: src/rsp
	examples/run-demo

test:
	./run_integration_tests

install: src/rsp
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 src/rsp $(DESTDIR)$(BINDIR)/rsp

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rsp

diffs:
	tools/stage-check --fix

clean:
	$(MAKE) -C src clean
	@set -e; for s in $(STAGES); do $(MAKE) -C $$s clean; done

FORCE:

.PHONY: all stages run test install uninstall diffs clean FORCE
