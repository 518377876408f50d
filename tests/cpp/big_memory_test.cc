// core/big_memory.h: the mapped buffer the trace text lives in, and the
// giving back of what was already read (BigBytes::release).
#include "core/big_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace torchneck {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(BigBytes, MappedInAlignedHugePagesWithZeroPadding) {
  BigBytes b(9 * kMiB + 123, 64);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (2 * kMiB), 0u);
  EXPECT_EQ(b.size(), 9 * kMiB + 123);
  EXPECT_EQ(b.padding(), 64u);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(b.data()[b.size() + i], 0) << i;
}

TEST(BigBytes, ReleaseZeroesOnlyWholeHugePagesInsideTheRange) {
  const size_t size = 10 * kMiB;
  BigBytes b(size, 64);
  std::memset(b.data(), 'x', size);
  // [1 MiB, 7.5 MiB): the whole 2 MiB pages inside it are [2, 6) MiB.
  ASSERT_EQ(b.release(kMiB, 7 * kMiB + kMiB / 2), 6 * kMiB);  // where the next call must start
  for (size_t i = 0; i < size; i += 4096) {
    const bool gone = i >= 2 * kMiB && i < 6 * kMiB;
    ASSERT_EQ(b.data()[i], gone ? 0 : 'x') << "offset " << i;
  }
  EXPECT_EQ(b.data()[size - 1], 'x');
  // Nothing whole inside: nothing given back, and it says so.
  EXPECT_EQ(b.release(7 * kMiB, 7 * kMiB + kMiB), 0u);
  EXPECT_EQ(b.data()[7 * kMiB], 'x');
  // From where the last call ended: the page [6, 8) MiB, which held its end.
  EXPECT_EQ(b.release(6 * kMiB, 9 * kMiB), 8 * kMiB);
  EXPECT_EQ(b.data()[6 * kMiB], 0);
  EXPECT_EQ(b.data()[8 * kMiB], 'x');
}

TEST(BigBytes, SmallBuffersAreNotMappedAndNeverReleased) {
  BigBytes b(kMiB, 64);
  std::memset(b.data(), 'y', kMiB);
  EXPECT_EQ(b.release(0, kMiB), 0u);
  EXPECT_EQ(b.data()[kMiB / 2], 'y');
}

TEST(BigBytes, MovedBufferKeepsItsBytes) {
  BigBytes a(5 * kMiB, 64);
  a.data()[12345] = 'z';
  BigBytes b(std::move(a));
  EXPECT_EQ(b.data()[12345], 'z');
  EXPECT_EQ(a.data(), nullptr);  // NOLINT: moved-from is empty by contract
  BigBytes c;
  c = std::move(b);
  EXPECT_EQ(c.size(), 5 * kMiB);
  EXPECT_EQ(c.data()[12345], 'z');
}

}  // namespace
}  // namespace torchneck
