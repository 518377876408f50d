#!/usr/bin/env bash
# Makes docs/gallery/: screenshots of report.html for bundled examples and the
# V100 trace, and prints the size of every file in their output folders (the
# table in docs/report-html.md). Needs the build, chromium and tests/browser's
# node_modules (make test installs them).
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gallery=docs/gallery
mkdir -p "$gallery"
./torchneck run -o "$out/heavy_linear" examples/heavy_linear.py >/dev/null 2>&1
./torchneck run -o "$out/input_bound_python" examples/input_bound_python.py --steps 150 >/dev/null 2>&1
./torchneck analyze -o "$out/v100_analyze" ../shared/fixtures/kineto/v100_resnet50_num_workers_0.trace.json.gz >/dev/null 2>&1
for name in heavy_linear input_bound_python v100_analyze; do
  node tests/browser/gallery.mjs "$out/$name/report.html" "$gallery/$name"
  for f in "$out/$name"/*; do
    printf '%-20s %-16s %9d\n' "$name" "$(basename "$f")" "$(stat -c %s "$f")"
  done
done
ls -l "$gallery"
