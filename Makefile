# rsp -- top-level targets. See README.md.
#   make            build src/rsp
#   make stages     build every tutorial stage
#   make run        serve the demo site through rsp on http://localhost:8000
#   make test       ./run_integration_tests (every stage and src/)
#   make install    install src/rsp into $(DESTDIR)$(PREFIX)/bin
#   make diffs      regenerate each stage's CHANGES.diff
#   make demos      build the stages and run every chapter's demos (tools/run-demos)
#   make asan       build src/ with AddressSanitizer + UBSan into build/asan/rsp
#   make fuzz       build the libFuzzer harnesses (fuzz/) and run each FUZZ_SECONDS
#   make fuzz-regressions   replay fuzz/regressions/ and the seed corpus once
#   make clean

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
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

install: src/rsp
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 src/rsp $(DESTDIR)$(BINDIR)/rsp

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rsp

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
	rm -rf build
	@set -e; for s in $(STAGES); do $(MAKE) -C $$s clean; done

FORCE:

.PHONY: all stages run test install uninstall diffs demos asan fuzz fuzz-regressions clean FORCE
