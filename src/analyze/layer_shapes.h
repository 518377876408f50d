// What a layer computes, read from its type and config (ModuleInfo::config,
// the module's extra_repr()): the sizes its multiply-adds scale with, for
// the kinds whose advice (heavy_layer) depends on them.
#pragma once

#include <cstdint>
#include <string>

namespace torchneck {

enum class LayerKind { kLinear, kConv, kRecurrent, kEmbedding, kAttention, kOther };

struct LayerShape {
  LayerKind kind = LayerKind::kOther;
  // Read from the config (else 0): Linear in and out features; Conv in and
  // out channels; LSTM, GRU, RNN input and hidden size; Embedding rows and
  // their width.
  int64_t in = 0, out = 0;
  int64_t kernel = 1;  // Conv: the kernel's elements (3x3: 9)
  int64_t groups = 1;  // Conv
  int64_t layers = 1, directions = 1;  // LSTM, GRU, RNN: num_layers, 2 when bidirectional
  bool sized() const { return in > 0 && out > 0; }
};

// "Linear" + "in_features=4096, out_features=512, bias=True" -> {kLinear,
// 4096, 512}; a config it cannot read leaves the sizes 0.
LayerShape layer_shape(const std::string& type, const std::string& config);

}  // namespace torchneck
