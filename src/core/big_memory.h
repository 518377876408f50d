// Memory for the largest buffer of an analysis (a trace's text): mapped in
// whole, aligned 2 MiB units and advised as transparent huge pages, so that
// a 15 MB buffer is faulted in with ~8 faults instead of ~3700: in 4 KiB
// pages the faults cost more than parsing the text (docs/analyze.md).
// glibc's own mappings (hugetlb=1) are not 2 MiB-aligned, so their first and
// last megabytes still fault page by page. Where transparent huge pages are
// off the advice does nothing: 4 KiB pages, as from malloc.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace torchneck {

// At least this many bytes: mapped (and rounded up to 2 MiB, which a huge
// page would fault in anyway); fewer: operator new. (Prefaulting the mapping
// in one call, MADV_POPULATE_WRITE, and mapping smaller buffers too were
// measured and gained nothing: a fresh page costs about the same either way.)
inline constexpr size_t kBigMemoryMin = size_t{4} << 20;

// Throws std::bad_alloc. big_free must be given the same size.
void* big_alloc(size_t bytes);
void big_free(void* p, size_t bytes) noexcept;

// A byte buffer of a fixed size with `padding` zero bytes after it (simdjson
// reads up to 64 bytes past the end of its input). Move-only.
class BigBytes {
 public:
  BigBytes() = default;
  BigBytes(size_t size, size_t padding);
  BigBytes(const char* data, size_t size, size_t padding);
  BigBytes(BigBytes&& o) noexcept { *this = std::move(o); }
  BigBytes& operator=(BigBytes&& o) noexcept;
  BigBytes(const BigBytes&) = delete;
  BigBytes& operator=(const BigBytes&) = delete;
  ~BigBytes();

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  size_t padding() const { return capacity_ - size_; }
  // A new size, keeping the bytes before it and the padding (zeros) after
  // it. A mapped buffer is remapped, not copied (its new pages are faulted
  // in only as they are written), and may move. Throws std::bad_alloc.
  void resize(size_t size);
  // Gives the memory of the whole huge pages inside [from, to) back to the
  // system (a mapped buffer only): they read as zeros afterwards. For text
  // already parsed, so that the peak memory is not the text plus all that
  // was read from it. Returns where what was given back ends (a huge page
  // boundary: the next call starts there, or the page that holds `to` is
  // never given back), 0 if nothing was.
  size_t release(size_t from, size_t to);

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace torchneck
