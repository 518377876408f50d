# The README's two commands: `make demo` and `make test`. Both install what
# is missing (Debian packages, as root), build, then run.
PYTHON ?= $(shell scripts/find-python.sh)
BUILD  ?= build
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
DEMO   ?= examples/heavy_linear.py

.PHONY: all deps build demo test test-phases test-cpp test-python test-python-loaded test-trixie trixie-root-early trixie-root-wait trixie-build-early browser-deps compat fuzz fuzz-short clean

all: build

deps:
	@scripts/ensure-deps.sh

$(BUILD)/CMakeCache.txt: CMakeLists.txt
	cmake -S . -B $(BUILD) -DPython_EXECUTABLE=$(PYTHON) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory
	@echo $(PYTHON) > $(BUILD)/python-path

demo: build
	./torchneck run $(DEMO)

# The suite in both environments: Debian 12 here (Python 3.11, torch 1.13),
# its tests that compare with the scripts' own clocks beside a busy loop on
# every core (a shared host; test-python-loaded), then again, quiet, in the
# Debian 13 root (Python 3.13, torch 2.x; test-trixie). The root is made
# while Debian 12's half builds, and waited for before Debian 12's timed
# tests; Debian 13's build then runs at nice 19 beside Debian 12's tests
# (scripts/trixie-build-early.sh), and test-trixie waits for it. (`make
# compat` is not in it: test-trixie builds those units for real.) A phase
# that fails does not stop the others (make -k): one run shows every
# failure, and fails.
test:
	@$(MAKE) --no-print-directory -k test-phases
test-phases: trixie-root-early build test-cpp trixie-root-wait trixie-build-early test-python-loaded fuzz-short test-trixie

# scripts/trixie-env.sh makes the root once, one maker at a time (a lock):
# started in the background here, its output in build/trixie-root.log; a
# failure there is met again, and reported, by test-trixie.
trixie-root-early: deps
	@mkdir -p $(BUILD) && (scripts/trixie-env.sh true >$(BUILD)/trixie-root.log 2>&1 </dev/null &)
trixie-root-wait:
	-@scripts/trixie-env.sh true >>$(BUILD)/trixie-root.log 2>&1 </dev/null
trixie-build-early: build
	@JOBS=$(JOBS) scripts/trixie-build-early.sh

test-cpp:
	cd $(BUILD) && ctest --output-on-failure

# The whole Python suite, quiet.
test-python: browser-deps
	$$(cat $(BUILD)/python-path) -m pytest -q tests/python

# The same suite, LOADED_TESTS under scripts/with-cpu-hog.sh: the timing
# tests hold on a machine whose cores other work also wants (those marked
# quiet_machine, whose premise needs the cores, run apart, quiet: after the
# background Debian 13 build, if one runs, has ended).
LOADED_TESTS = tests/python/test_distributed.py tests/python/test_detail_windows.py \
               tests/python/test_detail_loops.py tests/python/test_diagnosis.py
# Each of the three parts runs whatever the one before found; it fails if any did.
test-python-loaded: browser-deps
	@py=$$(cat $(BUILD)/python-path); status=0; set -x; \
	$$py -m pytest -q --durations=15 tests/python $(addprefix --ignore=,$(LOADED_TESTS)) || status=1; \
	scripts/with-cpu-hog.sh $$py -m pytest -q --durations=10 -m "not quiet_machine" $(LOADED_TESTS) || status=1; \
	scripts/trixie-build-wait.sh $$py -m pytest -q -m quiet_machine $(LOADED_TESTS) || status=1; \
	exit $$status

# playwright-core for the report.html browser tests, as pinned by the lockfile.
browser-deps: tests/browser/node_modules/.package-lock.json
tests/browser/node_modules/.package-lock.json: tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund

# The whole suite again (build, ctest, pytest, each timed) in a Debian 13 root:
# Python 3.13, Debian's torch 2.x. scripts/trixie-env.sh makes the root once
# (build/trixie, as root) and reuses it; inside, build/ is the host's build-trixie/.
test-trixie:
	JOBS=$(JOBS) scripts/test-trixie.sh

# Syntax check against torch 2.x and Python 3.13 headers (fetched from Debian trixie).
compat:
	scripts/check-compat.sh

# libFuzzer on the Kineto trace ingest (fuzz/run.sh; clang, ASan, UBSan).
# `make fuzz FUZZ_SECONDS=600` for a long run; `make test` runs 20 s.
FUZZ_SECONDS ?= 300
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_BUILD=$(BUILD)/fuzz fuzz/run.sh

fuzz-short: deps
	FUZZ_SECONDS=20 FUZZ_BUILD=$(BUILD)/fuzz fuzz/run.sh

clean:
	rm -rf $(BUILD) python/torchneck/_torchneck*.so torchneck-out
