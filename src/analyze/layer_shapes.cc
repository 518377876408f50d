#include "analyze/layer_shapes.h"

#include <map>
#include <vector>

namespace torchneck {
namespace {

// An extra_repr() split at its top-level commas: "3, 16, kernel_size=(3,
// 3), stride=(1, 1)" -> positional {"3", "16"}, named {kernel_size: "(3,
// 3)", stride: "(1, 1)"}.
struct ConfigItems {
  std::vector<std::string> positional;
  std::map<std::string, std::string> named;
};

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

ConfigItems config_items(const std::string& config) {
  ConfigItems items;
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : config) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  for (const std::string& raw : parts) {
    const std::string p = trimmed(raw);
    const size_t eq = p.find('=');
    if (p.empty()) continue;
    if (eq == std::string::npos || p.find('(') < eq) {
      items.positional.push_back(p);
    } else {
      items.named[trimmed(p.substr(0, eq))] = trimmed(p.substr(eq + 1));
    }
  }
  return items;
}

// "512" -> 512; "(3, 3)" -> 9 (a tuple's product); anything else -> 0.
int64_t size_of(const std::string& v) {
  int64_t product = 1, n = 0;
  bool digits = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      if (n > (int64_t{1} << 40)) return 0;
      n = n * 10 + (c - '0');
      digits = true;
    } else if (c == ',' || c == ')') {
      if (digits) product *= n;
      n = 0;
      digits = false;
    } else if (c != '(' && c != ' ') {
      return 0;
    }
  }
  if (digits) product *= n;
  return product;
}

// The named value, else the positional one at `index`, as a size.
int64_t size_at(const ConfigItems& items, const char* name, size_t index) {
  const auto it = items.named.find(name);
  if (it != items.named.end()) return size_of(it->second);
  return index < items.positional.size() ? size_of(items.positional[index]) : 0;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

LayerShape layer_shape(const std::string& type, const std::string& config) {
  LayerShape shape;
  const ConfigItems items = config_items(config);
  if (type == "Linear" || type == "LazyLinear") {
    shape.kind = LayerKind::kLinear;
    shape.in = size_at(items, "in_features", 0);
    shape.out = size_at(items, "out_features", 1);
  } else if (starts_with(type, "Conv")) {
    shape.kind = LayerKind::kConv;
    shape.in = size_at(items, "in_channels", 0);
    shape.out = size_at(items, "out_channels", 1);
    shape.kernel = size_at(items, "kernel_size", 2);
    const auto groups = items.named.find("groups");
    shape.groups = groups == items.named.end() ? 1 : size_of(groups->second);
    if (shape.kernel <= 0 || shape.groups <= 0) shape.in = shape.out = 0;
  } else if (type == "LSTM" || type == "GRU" || type == "RNN") {
    shape.kind = LayerKind::kRecurrent;
    shape.in = size_at(items, "input_size", 0);
    shape.out = size_at(items, "hidden_size", 1);
    const auto layers = items.named.find("num_layers");
    if (layers != items.named.end()) shape.layers = size_of(layers->second);
    const auto bidirectional = items.named.find("bidirectional");
    if (bidirectional != items.named.end() && bidirectional->second == "True") shape.directions = 2;
    if (shape.layers <= 0) shape.in = shape.out = 0;
  } else if (type == "Embedding" || type == "EmbeddingBag") {
    shape.kind = LayerKind::kEmbedding;
    shape.in = size_at(items, "num_embeddings", 0);
    shape.out = size_at(items, "embedding_dim", 1);
  } else if (type.find("Attention") != std::string::npos) {
    shape.kind = LayerKind::kAttention;
  }
  return shape;
}

}  // namespace torchneck
