// What to change in a layer that dominates its model (heavy_layer), by its
// kind, its shape (analyze/layer_shapes.h) and its place in the model, and
// what the change saves, computed from the layer's multiply-adds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyze/layers.h"

namespace torchneck {

struct LayerAdvice {
  std::string change;  // the recommendation
  // The share of the layer's time the change removes, by its multiply-adds
  // a sample before and after; none where its shape is unknown or the
  // change's saving depends on the data (a vocabulary's token frequencies).
  std::optional<double> saving;
  std::string saving_basis;  // "Linear(4096, 512) -> Linear(4096, 256): 2.10 M -> 1.05 M multiply-adds a sample"
  // Without `saving`: the most the change can remove, as a share of the
  // layer's time (sparse gradients: its backward; else all of it).
  double at_most = 1.0;
  std::string at_most_basis;  // why that bound
};

// `model`: every layer of the run (an Embedding's rows tell a vocabulary
// projection).
LayerAdvice layer_advice(const LayerStats& layer, const std::vector<LayerStats>& model);

}  // namespace torchneck
