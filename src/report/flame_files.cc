#include "report/flame_files.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <vector>

#include "report/json_writer.h"

namespace torchneck {

namespace {

// A copy of the tree with at most max_nodes nodes below the root's children;
// a node left out adds its total to its parent's self time. Children are
// heaviest first, so walking them in order keeps the heaviest.
struct Pruner {
  int64_t min_ns = 0;
  size_t budget = 0;

  FlameNode copy(const FlameNode& n, int depth) {
    FlameNode out;
    out.name = n.name;
    out.file = n.file;
    out.line = n.line;
    out.kind = n.kind;
    out.total_ns = n.total_ns;
    out.self_ns = n.self_ns;
    out.samples = n.samples;
    for (const auto& c : n.children) {
      const bool always = depth == 0;  // the root's children: threads, top frames
      if (always || (c.total_ns >= min_ns && budget > 0)) {
        if (!always) --budget;
        out.children.push_back(copy(c, depth + 1));
      } else {
        out.self_ns += c.total_ns;
      }
    }
    return out;
  }
};

FlameNode pruned(const FlameNode& root, size_t max_nodes) {
  std::vector<int64_t> totals;
  std::vector<const FlameNode*> todo;
  for (const auto& c : root.children) todo.push_back(&c);
  while (!todo.empty()) {
    const FlameNode* n = todo.back();
    todo.pop_back();
    for (const auto& c : n->children) {
      totals.push_back(c.total_ns);
      todo.push_back(&c);
    }
  }
  Pruner p;
  p.budget = max_nodes;
  if (totals.size() > max_nodes && max_nodes > 0) {
    std::nth_element(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(max_nodes - 1), totals.end(),
                     std::greater<int64_t>());
    p.min_ns = totals[max_nodes - 1];
  }
  return p.copy(root, 0);
}

void append_utf8_replacement(std::string& out) { out += "\xef\xbf\xbd"; }

}  // namespace

std::string sanitize_folded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == ';') {
      out += ':';
    } else if (c < 0x20 || c == 0x7f) {
      out += ' ';
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // Valid UTF-8 passes; anything else becomes U+FFFD.
      const size_t len = (c >= 0xf0 && c < 0xf5) ? 4 : (c >= 0xe0 && c < 0xf0) ? 3 : (c >= 0xc2 && c < 0xe0) ? 2 : 0;
      bool ok = len > 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok) {
        out.append(s.substr(i, len));
        i += len - 1;
      } else {
        append_utf8_replacement(out);
      }
    }
  }
  if (out.empty()) out = "?";
  return out;
}

std::string folded_frame_name(const FlameNode& n) {
  if (n.kind == FlameKind::kPython && !n.file.empty())
    return sanitize_folded(n.name + " (" + n.file + ":" + std::to_string(n.line) + ")");
  return sanitize_folded(n.name);
}

std::string folded_stacks(const FlameNode& tree, size_t max_nodes) {
  const FlameNode root = pruned(tree, max_nodes);
  std::string out;
  int64_t cum_ns = 0;
  int64_t written_us = 0;
  std::vector<std::string> path;
  // Cumulative rounding: the lines add up to round(total / 1 us) exactly.
  auto line = [&](int64_t self_ns) {
    if (self_ns <= 0) return;
    cum_ns += self_ns;
    const int64_t us = (cum_ns + 500) / 1000 - written_us;
    if (us <= 0) return;
    written_us += us;
    for (size_t i = 0; i < path.size(); ++i) {
      if (i > 0) out += ';';
      out += path[i];
    }
    out += ' ';
    out += std::to_string(us);
    out += '\n';
  };
  std::function<void(const FlameNode&)> walk = [&](const FlameNode& n) {
    path.push_back(folded_frame_name(n));
    line(n.self_ns);
    for (const auto& c : n.children) walk(c);
    path.pop_back();
  };
  if (root.self_ns > 0) {  // time on no frame at all (a stack without frames)
    path.push_back("all");
    line(root.self_ns);
    path.pop_back();
  }
  for (const auto& c : root.children) walk(c);
  return out;
}

std::string speedscope_json(const FlameNode& tree, const std::string& name, size_t max_nodes) {
  const FlameNode root = pruned(tree, max_nodes);
  // Frames are shared by all profiles: one per (name, file, line).
  std::vector<const FlameNode*> frames;
  std::unordered_map<std::string, size_t> frame_of;
  auto frame_index = [&](const FlameNode& n) {
    std::string key = n.name;
    key += '\0';
    key += n.file;
    key += '\0';
    key += std::to_string(n.line);
    auto [it, added] = frame_of.emplace(std::move(key), frames.size());
    if (added) frames.push_back(&n);
    return it->second;
  };
  struct Profile {
    std::string name;
    std::vector<std::vector<size_t>> samples;
    std::vector<int64_t> weights;
    int64_t total = 0;
  };
  std::vector<Profile> profiles;
  std::vector<size_t> path;
  std::function<void(Profile&, const FlameNode&)> walk = [&](Profile& p, const FlameNode& n) {
    path.push_back(frame_index(n));
    if (n.self_ns > 0) {
      p.samples.push_back(path);
      p.weights.push_back(n.self_ns);
      p.total += n.self_ns;
    }
    for (const auto& c : n.children) walk(p, c);
    path.pop_back();
  };
  const bool per_thread =
      !root.children.empty() && std::all_of(root.children.begin(), root.children.end(),
                                            [](const FlameNode& c) { return c.kind == FlameKind::kThread; });
  FlameNode all;  // the frame for time on no frame at all
  all.name = "all";
  if (per_thread) {
    for (const auto& t : root.children) {
      Profile p;
      p.name = t.name;
      if (t.self_ns > 0) {  // a thread's own time: a stack of the thread alone
        path.push_back(frame_index(t));
        p.samples.push_back(path);
        p.weights.push_back(t.self_ns);
        p.total += t.self_ns;
        path.pop_back();
      }
      for (const auto& c : t.children) walk(p, c);
      profiles.push_back(std::move(p));
    }
  }
  if (!per_thread || root.self_ns > 0) {
    Profile p;
    p.name = per_thread ? "all" : name;
    if (root.self_ns > 0) {
      p.samples.push_back({frame_index(all)});
      p.weights.push_back(root.self_ns);
      p.total += root.self_ns;
    }
    if (!per_thread)
      for (const auto& c : root.children) walk(p, c);
    profiles.push_back(std::move(p));
  }

  JsonWriter w;
  w.begin_object();
  w.field("$schema", "https://www.speedscope.app/file-format-schema.json");
  w.field("exporter", "torchneck");
  w.field("name", name);
  w.field("activeProfileIndex", 0);
  w.key("shared").begin_object().key("frames").begin_array();
  for (const FlameNode* f : frames) {
    w.begin_object();
    w.field("name", f->name.empty() ? std::string("?") : f->name);
    if (!f->file.empty()) {
      w.field("file", f->file);
      w.field("line", f->line);
    }
    w.end_object();
  }
  w.end_array().end_object();
  w.key("profiles").begin_array();
  for (const Profile& p : profiles) {
    w.begin_object();
    w.field("type", "sampled");
    w.field("name", p.name);
    w.field("unit", "nanoseconds");
    w.field("startValue", 0);
    w.field("endValue", p.total);
    w.key("samples").begin_array();
    for (const auto& s : p.samples) {
      w.begin_array();
      for (size_t f : s) w.value(static_cast<uint64_t>(f));
      w.end_array();
    }
    w.end_array();
    w.key("weights").begin_array();
    for (int64_t x : p.weights) w.value(x);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

}  // namespace torchneck
