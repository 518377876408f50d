// GIVEN/WHEN/THEN tests of the hot-path building blocks.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/event_buffer.h"
#include "core/files.h"
#include "core/flat_map.h"
#include "core/interner.h"
#include "core/side_arena.h"
#include "core/threads.h"
#include "torchneck/records.h"

namespace torchneck {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Either way of replacing: the new text in place of the old, whole, and no
// temporary file left; a path that cannot be written: one line, nothing left.
TEST(WriteFile, ReplacesTheOldFileWholeEitherWay) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "torchneck_write_file_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (Replace how : {Replace::kAtomically, Replace::kRemoveOldFirst}) {
    const fs::path p = dir / "out.json";
    write_file_atomically(p.string(), std::string(100000, 'a'), how);
    EXPECT_EQ(read_all(p), std::string(100000, 'a'));
    write_file_atomically(
        p.string(), [](const std::function<void(std::string_view)>& sink) { sink("new"); sink(" text"); }, how);
    EXPECT_EQ(read_all(p), "new text");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary left
    // The old file a folder: it cannot be removed or replaced; it is kept.
    const fs::path d = dir / "a_folder";
    fs::create_directories(d / "inside");
    try {
      write_file_atomically(d.string(), "x", how);
      ADD_FAILURE() << "wrote over a folder";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cannot write " + d.string() + ": ", 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    EXPECT_TRUE(fs::is_directory(d / "inside"));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
    fs::remove_all(d);
    fs::remove(p);
  }
  fs::remove_all(dir);
}

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

TEST(InternCache, AnAddressHitIsConfirmedByTheWholeText) {
  // GIVEN a name looked up by address, then the same buffer grown by one
  // character (same address, same prefix), then shrunk back
  StringInterner interner;
  InternCache cache(&interner);
  char buf[32] = "aten::add";
  const uint32_t add = cache.intern(static_cast<const char*>(buf));
  std::snprintf(buf, sizeof buf, "aten::add_");
  const uint32_t add_ = cache.intern(static_cast<const char*>(buf));
  // THEN each text has its own id, and the first comes back for the first
  EXPECT_NE(add, add_);
  EXPECT_EQ(interner.lookup(add_), "aten::add_");
  std::snprintf(buf, sizeof buf, "aten::add");
  EXPECT_EQ(cache.intern(static_cast<const char*>(buf)), add);
  // AND the same text at another address is the same id
  const std::string copy = "aten::add_";
  EXPECT_EQ(cache.intern(copy.c_str()), add_);
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

// Records copied in across several chunks and one oversized block: each
// still holds its own bytes at the end, aligned to 8, and none of it came
// from malloc's heap (the reason the arena exists: side_arena.h).
TEST(SideArena, KeepsEveryCopyOutsideTheMallocHeap) {
  SideArena arena;
  std::vector<const char*> kept;
  kept.reserve(3000);
  std::string big(SideArena::kChunkBytes + 100, 'b');
  const size_t heap_before = mallinfo2().uordblks;
  const char* big_copy = nullptr;
  for (int i = 0; i < 3000; ++i) {
    char text[64];
    const int n = snprintf(text, sizeof text, "[[%d, 3, 32, 32], [16]] float,float", i);
    const char* p = arena.copy(text, static_cast<size_t>(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
    kept.push_back(p);
    if (i == 1500) big_copy = arena.copy(big.data(), big.size());
  }
  const size_t heap_after = mallinfo2().uordblks;
  // 3000 texts of ~40 bytes: ~120 KB if they had been malloc'd; the arena's
  // own list of chunks is a few dozen bytes.
  EXPECT_LT(heap_after - std::min(heap_after, heap_before), 4096u);
  EXPECT_GE(arena.mapped_bytes(), 2 * SideArena::kChunkBytes + big.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    char text[64];
    const int n = snprintf(text, sizeof text, "[[%zu, 3, 32, 32], [16]] float,float", i);
    EXPECT_EQ(std::string(kept[i], static_cast<size_t>(n)), std::string(text, static_cast<size_t>(n)));
  }
  ASSERT_NE(big_copy, nullptr);
  EXPECT_EQ(std::string(big_copy, big.size()), big);
  arena.reset();
  EXPECT_EQ(arena.mapped_bytes(), 0u);
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
