// The flame tree (analyze/flame.h) as files for other tools:
// - stacks.folded: Brendan Gregg's collapsed stacks, `frame;frame;frame N`
//   one line per path with self time, N in microseconds (flamegraph.pl,
//   speedscope, inferno, Firefox Profiler read it);
// - profile.speedscope.json: speedscope's file format
//   (https://www.speedscope.app/file-format-schema.json), one "sampled"
//   profile per thread, weights in nanoseconds.
// Both are bounded: at most `max_nodes` tree nodes are written besides the
// root's children (which are always kept); lighter nodes are folded into
// their parent's self time, so totals are unchanged. See docs/flame-graphs.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "analyze/flame.h"

namespace torchneck {

constexpr size_t kFlameFileMaxNodes = 50000;

// A frame's name in stacks.folded: `function (file:line)` for Python frames,
// the name otherwise; made one valid field of one line: ';' becomes ':',
// control characters (newlines included) become spaces, invalid UTF-8 becomes
// U+FFFD, an empty name becomes "?".
std::string folded_frame_name(const FlameNode& node);
std::string sanitize_folded(std::string_view name);

// stacks.folded. Values are rounded so that the lines add up to the root's
// total in microseconds (rounded); paths that round to 0 are left out.
std::string folded_stacks(const FlameNode& root, size_t max_nodes = kFlameFileMaxNodes);

// profile.speedscope.json. `name` names the file's profile group and, with a
// single thread, its profile.
std::string speedscope_json(const FlameNode& root, const std::string& name, size_t max_nodes = kFlameFileMaxNodes);

}  // namespace torchneck
