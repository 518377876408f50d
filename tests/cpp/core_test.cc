// GIVEN/WHEN/THEN tests of the hot-path building blocks.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/event_buffer.h"
#include "core/flat_map.h"
#include "core/interner.h"
#include "core/threads.h"
#include "torchneck/records.h"

namespace torchneck {
namespace {

TEST(StringInterner, SameTextSameIdWhateverTheAddress) {
  StringInterner interner;
  std::string a = "aten::add";
  std::string b = std::string("aten::") + "add";  // same text, other buffer
  const uint32_t ia = interner.intern(a);
  EXPECT_EQ(ia, interner.intern(b));
  EXPECT_NE(ia, interner.intern("aten::mul"));
  EXPECT_EQ(interner.lookup(ia), "aten::add");
  EXPECT_EQ(interner.size(), 2u);
}

TEST(StringInterner, LookupViewsStayValidWhileGrowing) {
  StringInterner interner;
  const uint32_t first = interner.intern("first");
  const std::string_view view = interner.lookup(first);
  for (int i = 0; i < 10000; ++i) interner.intern("name" + std::to_string(i));
  EXPECT_EQ(view, "first");  // deque storage: no reallocation of old strings
  EXPECT_EQ(interner.lookup(first), "first");
}

TEST(InternCache, AgreesWithBackingInternerAcrossGrowth) {
  StringInterner interner;
  InternCache cache(&interner, 16);
  std::vector<uint32_t> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(cache.intern("op" + std::to_string(i)));
  for (int i = 0; i < 1000; ++i) {
    const std::string name = "op" + std::to_string(i);
    EXPECT_EQ(cache.intern(name), ids[i]);
    EXPECT_EQ(interner.lookup(ids[i]), name);
  }
  EXPECT_EQ(cache.size(), 1000u);
  EXPECT_EQ(interner.size(), 1000u);
}

TEST(InternCache, ReusedBufferWithNewTextGetsNewId) {
  // GIVEN a buffer whose address is reused for a different name (as a
  // record_function string freed and reallocated would be)
  StringInterner interner;
  InternCache cache(&interner);
  char buf[32] = "Optimizer.step#SGD.step";
  const uint32_t first = cache.intern(buf);
  std::snprintf(buf, sizeof buf, "my_scope");
  // THEN the content, not the address, decides
  EXPECT_NE(cache.intern(buf), first);
  EXPECT_EQ(interner.lookup(cache.intern(buf)), "my_scope");
}

TEST(InternCache, ThreadsShareIdsThroughTheGlobalInterner) {
  StringInterner interner;
  std::vector<uint32_t> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      InternCache cache(&interner);
      for (int i = 0; i < 500; ++i) cache.intern("n" + std::to_string(i));
      seen[t] = cache.intern("n42");
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 4; ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(interner.size(), 500u);
}

TEST(EventBuffer, KeepsOrderAcrossChunksAndCountsDrops) {
  EventBuffer<OpEvent, 4> buf(10);
  for (int i = 0; i < 13; ++i) {
    OpEvent e{};
    e.start_ns = i;
    buf.append(e);
  }
  ASSERT_EQ(buf.size(), 10u);
  EXPECT_EQ(buf.dropped(), 3u);
  for (size_t i = 0; i < buf.size(); ++i) EXPECT_EQ(buf[i].start_ns, static_cast<int64_t>(i));
  buf.clear();
  EXPECT_EQ(buf.size(), 0u);
  EXPECT_EQ(buf.dropped(), 0u);
}

TEST(EventBuffer, ZeroCapacityDropsEverything) {
  EventBuffer<OpEvent> buf(0);
  EXPECT_FALSE(buf.append(OpEvent{}));
  EXPECT_EQ(buf.dropped(), 1u);
}

TEST(FlatMap64, FindsWhatWasInsertedThroughGrowth) {
  FlatMap64 map(16);
  for (uint64_t k = 1; k <= 5000; ++k) map.insert(k * 64, static_cast<uint32_t>(k));
  for (uint64_t k = 1; k <= 5000; ++k) EXPECT_EQ(map.find(k * 64), k);
  EXPECT_EQ(map.find(7), FlatMap64::kMissing);
  EXPECT_EQ(map.size(), 5000u);
}

TEST(Threads, EachThreadGetsItsOwnStableIndex) {
  const uint32_t mine = current_thread_index();
  EXPECT_EQ(current_thread_index(), mine);
  uint32_t other = mine;
  uint64_t other_tid = 0;
  std::thread([&] {
    other = current_thread_index();
    other_tid = current_os_tid();
  }).join();
  EXPECT_NE(other, mine);
  EXPECT_EQ(thread_index_for(other_tid), other);
  std::set<uint64_t> tids;
  for (const auto& t : registered_threads()) tids.insert(t.os_tid);
  EXPECT_TRUE(tids.count(current_os_tid()));
}

}  // namespace
}  // namespace torchneck
