// A layer's shape from its extra_repr(), as torch prints it for the kinds
// heavy_layer's advice computes with (torch/nn/modules/*.py extra_repr).
#include <gtest/gtest.h>

#include "analyze/layer_shapes.h"

namespace torchneck {
namespace {

TEST(LayerShapes, LinearReadsItsFeaturesByName) {
  const LayerShape s = layer_shape("Linear", "in_features=4096, out_features=512, bias=True");
  EXPECT_EQ(s.kind, LayerKind::kLinear);
  EXPECT_EQ(s.in, 4096);
  EXPECT_EQ(s.out, 512);
}

TEST(LayerShapes, ConvReadsChannelsKernelAndGroups) {
  const LayerShape s = layer_shape("Conv2d", "32, 64, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2");
  EXPECT_EQ(s.kind, LayerKind::kConv);
  EXPECT_EQ(s.in, 32);
  EXPECT_EQ(s.out, 64);
  EXPECT_EQ(s.kernel, 9);
  EXPECT_EQ(s.groups, 2);
  const LayerShape one_d = layer_shape("Conv1d", "16, 16, kernel_size=(5,), stride=(1,)");
  EXPECT_EQ(one_d.kernel, 5);
  EXPECT_EQ(layer_shape("ConvTranspose2d", "16, 3, kernel_size=(4, 4), stride=(2, 2)").out, 3);
}

TEST(LayerShapes, RecurrentReadsSizesLayersAndDirections) {
  const LayerShape s = layer_shape("LSTM", "10, 20, num_layers=2, batch_first=True, bidirectional=True");
  EXPECT_EQ(s.kind, LayerKind::kRecurrent);
  EXPECT_EQ(s.in, 10);
  EXPECT_EQ(s.out, 20);
  EXPECT_EQ(s.layers, 2);
  EXPECT_EQ(s.directions, 2);
  EXPECT_EQ(layer_shape("GRU", "8, 16").layers, 1);
}

TEST(LayerShapes, EmbeddingAndAttention) {
  const LayerShape e = layer_shape("Embedding", "50257, 768, padding_idx=0");
  EXPECT_EQ(e.kind, LayerKind::kEmbedding);
  EXPECT_EQ(e.in, 50257);
  EXPECT_EQ(e.out, 768);
  EXPECT_EQ(layer_shape("MultiheadAttention", "").kind, LayerKind::kAttention);
}

TEST(LayerShapes, WhatItCannotReadLeavesItUnsized) {
  EXPECT_FALSE(layer_shape("Linear", "").sized());
  EXPECT_FALSE(layer_shape("Linear", "in_features=n, out_features=512").sized());
  EXPECT_FALSE(layer_shape("Conv2d", "3, 16, kernel_size=(3, 3), groups=0").sized());
  EXPECT_FALSE(layer_shape("Linear", "in_features=99999999999999999999999, out_features=2").sized());
  const LayerShape custom = layer_shape("MyBlock", "width=4096");
  EXPECT_EQ(custom.kind, LayerKind::kOther);
  EXPECT_FALSE(custom.sized());
}

}  // namespace
}  // namespace torchneck
