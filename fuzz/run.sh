#!/usr/bin/env bash
# Builds the ingest fuzz target (libFuzzer + ASan + UBSan, Debian's clang) and
# fuzzes kineto::parse_trace for FUZZ_SECONDS (30) seconds, starting from the
# seeds in fuzz/corpus (copied; what the fuzzer learns stays in the build
# folder). Exits non-zero on a finding and says where the input was saved.
#
#   fuzz/run.sh                        # 30 s
#   FUZZ_SECONDS=600 fuzz/run.sh       # or: make fuzz FUZZ_SECONDS=600
#   fuzz/run.sh build/fuzz/crashes/crash-1234   # replay inputs, no fuzzing
#
# Environment: FUZZ_SECONDS, FUZZ_BUILD (build/fuzz), FUZZ_MAX_LEN (65536),
# CLANGXX (clang++), FUZZ_FLAGS (extra libFuzzer flags).
set -eu
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${FUZZ_SECONDS:-30}
OUT=${FUZZ_BUILD:-build/fuzz}
CXX=${CLANGXX:-clang++}
BIN=$OUT/ingest_fuzz
SRCS="src/ingest/kineto_json.cc src/model/activity.cc src/ingest/exact_times.cc src/ingest/trace_file.cc src/core/big_memory.cc src/core/files.cc fuzz/ingest_fuzz.cc"
DEPS="$SRCS src/ingest/kineto_json.h src/ingest/kineto_parser.h src/ingest/kineto_trace.h src/ingest/exact_times.h src/ingest/trace_file.h src/core/big_memory.h src/core/files.h src/core/timing.h fuzz/run.sh"

if ! command -v "$CXX" >/dev/null; then
  echo "fuzz: $CXX not found (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 1
fi
mkdir -p "$OUT/corpus" "$OUT/crashes"

stale=0
[ -x "$BIN" ] || stale=1
for f in $DEPS; do [ "$stale" = 1 ] || [ "$f" -nt "$BIN" ] && stale=1; done
if [ "$stale" = 1 ]; then
  echo "fuzz: building $BIN" >&2
  # -O1 -g: readable stacks; UBSan findings abort instead of going on.
  "$CXX" -std=c++20 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I include -I src $SRCS -lsimdjson -lz -lisal -o "$BIN.tmp"
  mv "$BIN.tmp" "$BIN"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ $# -gt 0 ]; then  # replay
  exec "$BIN" -timeout=10 "$@"
fi

cp -n fuzz/corpus/* "$OUT/corpus/" 2>/dev/null || true
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
set +e
"$BIN" "$OUT/corpus" -dict=fuzz/kineto.dict -max_total_time="$SECONDS_TO_RUN" \
  -max_len="${FUZZ_MAX_LEN:-65536}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/crashes/" ${FUZZ_FLAGS:-} 2>"$OUT/last.log"
rc=$?
set -e
grep -E "^(#[0-9]+ +DONE|stat::|Done )" "$OUT/last.log" >&2 || true
# A finding: libFuzzer failed, or saved an input (with -fork=N and
# -ignore_crashes=1 it goes on and exits 0).
new=$(find "$OUT/crashes" -type f -newer "$marker")
if [ "$rc" != 0 ] || [ -n "$new" ]; then
  grep -vE "^#[0-9]+ |^ +NEW_FUNC" "$OUT/last.log" | tail -60 >&2
  echo "fuzz: FINDING (libFuzzer exit $rc). Full log: $OUT/last.log" >&2
  for f in $new; do
    echo "fuzz: input saved to $f ($(wc -c <"$f") bytes); replay: fuzz/run.sh $f" >&2
    if [ "$(wc -c <"$f")" -le 4096 ]; then echo "fuzz: base64: $(base64 -w0 "$f")" >&2; fi
  done
  exit 1
fi
echo "fuzz: no finding in ${SECONDS_TO_RUN} s" >&2
