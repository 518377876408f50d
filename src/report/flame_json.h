// The flame tree (analyze/flame.h) as the JSON report.html's icicle reads.
#pragma once

#include <cstddef>
#include <string>

#include "analyze/flame.h"

namespace torchneck {

// The tree as JSON for report.html: {"name", "kind", "file", "line",
// "value" (total ns), "self" (ns), "children": [...]}. Nodes lighter than
// min_share of the root are folded into their parent's self time, and at
// most max_nodes nodes are written (the heaviest), so the page stays small;
// "omitted_nodes" on the root says how many were left out.
std::string flame_json(const FlameNode& root, double min_share = 0.0005, size_t max_nodes = 20000);

}  // namespace torchneck
