#include "analyze/layer_advice.h"

#include <algorithm>
#include <cstdio>

#include "analyze/findings.h"
#include "analyze/layer_shapes.h"

namespace torchneck {
namespace {

// A low-rank pair Linear(in, r) -> Linear(r, out) is offered with r a
// quarter of the smaller width: a common starting rank, kept only where it
// saves multiply-adds.
constexpr int64_t kLowRankDivisor = 4;

// "2.10 M", "786 k", "512".
std::string fmt_count(double n) {
  char b[32];
  if (n >= 1e9) {
    std::snprintf(b, sizeof b, "%.2f G", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(b, sizeof b, "%.2f M", n / 1e6);
  } else if (n >= 1e4) {
    std::snprintf(b, sizeof b, "%.0f k", n / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.0f", n);
  }
  return b;
}

std::string str(int64_t n) { return std::to_string(n); }

// The change from BEFORE to AFTER multiply-adds (a sample's, unless UNIT
// says), as a LayerAdvice's saving.
void set_saving(LayerAdvice& a, const std::string& change, double before, double after,
                const char* unit = "a sample") {
  a.saving = before > 0 ? 1.0 - after / before : 0.0;
  a.saving_basis = change + ": " + fmt_count(before) + " -> " + fmt_count(after) + " multiply-adds " + unit;
}

// The Embedding whose rows are as many as `outputs`: the vocabulary an
// output layer projects onto; nullptr when none.
const LayerStats* vocabulary_of(int64_t outputs, const std::vector<LayerStats>& model) {
  for (const LayerStats& l : model) {
    const LayerShape s = layer_shape(l.type, l.config);
    if (s.kind == LayerKind::kEmbedding && s.in == outputs) return &l;
  }
  return nullptr;
}

LayerAdvice linear_advice(const LayerStats& l, const LayerShape& s, const std::vector<LayerStats>& model) {
  LayerAdvice a;
  const std::string before = "Linear(" + str(s.in) + ", " + str(s.out) + ")";
  if (l.output_layer) {
    if (const LayerStats* vocab = vocabulary_of(s.out, model)) {
      a.change = l.name + " is the vocabulary projection (" + str(s.out) + " outputs, as " + vocab->name +
                 "'s rows): its cost is the vocabulary's. nn.AdaptiveLogSoftmaxWithLoss computes the rare tokens' "
                 "outputs only for the batches that need them, a sampled softmax skips most of them in training; "
                 "on GPU, mixed precision (torch.autocast)";
      a.at_most_basis = "what the vocabulary's rare tokens save depends on their frequencies in the data: measure it";
      return a;
    }
    const int64_t narrower = s.in / 2;
    a.change = l.name + "'s " + str(s.out) + " outputs are what the task asks: narrow what feeds it, " + before +
               " -> Linear(" + str(narrower) + ", " + str(s.out) + ") (the layer before it made as narrow)";
    set_saving(a, before + " -> Linear(" + str(narrower) + ", " + str(s.out) + ")", double(s.in) * s.out,
               double(narrower) * s.out);
    return a;
  }
  const int64_t narrower = s.out / 2;
  const std::string after = "Linear(" + str(s.in) + ", " + str(narrower) + ")";
  a.change = "halve " + l.name + "'s width: " + before + " -> " + after + " (and the next layer's input to match)";
  const int64_t r = std::max<int64_t>(1, std::min(s.in, s.out) / kLowRankDivisor);
  const double low_rank = double(r) * double(s.in + s.out);
  if (low_rank < double(s.in) * s.out)
    a.change += "; or a low-rank pair nn.Linear(" + str(s.in) + ", " + str(r) + ") -> nn.Linear(" + str(r) + ", " +
                str(s.out) + "), " + fmt_pct(1.0 - low_rank / (double(s.in) * s.out)) + " fewer multiply-adds";
  a.change += "; on GPU, mixed precision (torch.autocast) runs it on tensor cores";
  set_saving(a, before + " -> " + after, double(s.in) * s.out, double(s.in) * narrower);
  return a;
}

LayerAdvice conv_advice(const LayerStats& l, const LayerShape& s) {
  LayerAdvice a;
  const double per_group = double(s.kernel) * s.in / s.groups;  // multiply-adds per output channel and position
  if (l.output_layer) {
    const int64_t narrower = s.in / 2;
    a.change = l.name + "'s " + str(s.out) + " output channels are what the task asks: feed it " + str(narrower) +
               " channels instead of " + str(s.in) + " (the layer before it made as narrow)";
    set_saving(a, "in_channels " + str(s.in) + " -> " + str(narrower), per_group * s.out,
               double(s.kernel) * narrower / s.groups * s.out);
    return a;
  }
  const int64_t narrower = s.out / 2;
  a.change = "halve " + l.name + "'s output channels, " + str(s.out) + " -> " + str(narrower) +
             " (and the next layer's input to match)";
  if (s.groups == 1 && s.kernel > 1) {
    const double separable = double(s.kernel) * s.in + double(s.in) * s.out;
    a.change += "; or a depthwise-separable pair (groups=" + str(s.in) + ", then a 1x1 to " + str(s.out) + "), " +
                fmt_pct(1.0 - separable / (per_group * s.out)) +
                " fewer multiply-adds, though on CPU depthwise convolutions run well below their count";
  }
  a.change += "; channels_last memory format (model.to(memory_format=torch.channels_last))";
  set_saving(a, "out_channels " + str(s.out) + " -> " + str(narrower), per_group * s.out, per_group * narrower);
  return a;
}

// Multiply-adds a time step of an LSTM, GRU or RNN of hidden size H, up to
// its gates' factor (the same before and after): every layer's weights on
// its input and its hidden state, in each direction.
double recurrent_macs(const LayerShape& s, double h) {
  double macs = 0;
  for (int64_t k = 0; k < s.layers; ++k) {
    const double input = k == 0 ? double(s.in) : h * s.directions;
    macs += s.directions * h * (input + h);
  }
  return macs;
}

LayerAdvice recurrent_advice(const LayerStats& l, const LayerShape& s) {
  LayerAdvice a;
  const int64_t narrower = s.out / 2;
  a.change = "halve " + l.name + "'s hidden_size, " + str(s.out) + " -> " + str(narrower) +
             "; or train on shorter sequences (truncated backpropagation through time)";
  set_saving(a, "hidden_size " + str(s.out) + " -> " + str(narrower) + ", " + str(s.layers) + " layer(s)",
             recurrent_macs(s, double(s.out)), recurrent_macs(s, double(narrower)), "a time step and gate");
  return a;
}

}  // namespace

LayerAdvice layer_advice(const LayerStats& l, const std::vector<LayerStats>& model) {
  const LayerShape s = layer_shape(l.type, l.config);
  const bool halvable = s.sized() && s.in >= 2 && s.out >= 2;
  if (halvable && s.kind == LayerKind::kLinear) return linear_advice(l, s, model);
  if (halvable && s.kind == LayerKind::kConv) return conv_advice(l, s);
  if (halvable && s.kind == LayerKind::kRecurrent) return recurrent_advice(l, s);
  LayerAdvice a;
  if (s.kind == LayerKind::kEmbedding) {
    a.change = "pass sparse=True to " + l.name + ": its backward then writes only the rows a batch uses "
               "(with an optimizer that takes sparse gradients: SGD, SparseAdam)";
    a.at_most = l.combined() > 0 ? double(l.backward_ns) / double(l.combined()) : 0.0;
    a.at_most_basis = "its backward, all a sparse gradient can save";
  } else if (s.kind == LayerKind::kAttention) {
    a.change = "use torch.nn.functional.scaled_dot_product_attention (torch >= 2.0) or shorter sequences for " + l.name;
    a.at_most_basis = "the layer's whole time: the fused kernel's saving depends on the sequence length";
  } else {
    a.change = "profile " + l.name + " (" + l.type + ") alone and reduce its size or work";
    a.at_most_basis = "the layer's whole time: its shape is not known here";
  }
  return a;
}

}  // namespace torchneck
