// The spill's fields, declared once. Each record is one template,
//   template <class IO, class R> void fields(IO& io, R& record)
// (R const when encoding), that names its fields in their stored order with
// the vocabulary below. Four IOs read that one declaration: Encode writes
// the fields, Decode reads and checks them, MinBytes gives the least bytes a
// record takes (a stored count is checked against it) and Layout spells the
// format out (run_io.cc's version follows it). Internal to src/model/run_io*.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "model/run_io_codec.h"

namespace torchneck::run_io_detail {

// A number is stored as its own type: the struct's field type is the format.
template <typename T>
constexpr bool kStoredNumber = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

class Encode {
 public:
  explicit Encode(Writer& w) : w_(w) {}
  template <typename T>
  void num(const T& v) {
    static_assert(kStoredNumber<T>);
    w_.num(v);
  }
  void flag(const bool& v) { w_.num<uint8_t>(v ? 1 : 0); }
  void str(const std::string& s) { w_.str(s); }
  void strs(const std::vector<std::string>& v) { w_.strs(v); }
  void index(const uint32_t& v, size_t /*limit*/, const char* /*what*/) { w_.num(v); }
  void op_kind(const OpKind& k) { w_.num<uint8_t>(static_cast<uint8_t>(k)); }
  // An enum is stored as its name (model/run_enums.h), so that the format
  // does not depend on the enum's numbering.
  template <typename E, typename FromString>
  void name(const E& v, FromString /*from_string*/) {
    w_.str(std::string(to_string(v)));
  }
  template <typename T, typename Each>
  void list(const std::vector<T>& v, Each&& each) {
    w_.num<uint64_t>(v.size());
    for (const T& x : v) each(*this, x);
  }
  // A condition on what was just read; only Decode evaluates it.
  template <typename Holds>
  void check(Holds&& /*holds*/, const char* /*why*/) {}

 private:
  Writer& w_;
};

class MinBytes {
 public:
  size_t bytes() const { return bytes_; }
  template <typename T>
  void num(const T&) {
    static_assert(kStoredNumber<T>);
    bytes_ += sizeof(T);
  }
  void flag(const bool&) { bytes_ += 1; }
  void str(const std::string&) { bytes_ += 8; }  // its length
  void strs(const std::vector<std::string>&) { bytes_ += 8; }
  void index(const uint32_t&, size_t, const char*) { bytes_ += 4; }
  void op_kind(const OpKind&) { bytes_ += 1; }
  template <typename E, typename FromString>
  void name(const E&, FromString) {
    bytes_ += 8;
  }
  template <typename T, typename Each>
  void list(const std::vector<T>&, Each&&) {
    bytes_ += 8;  // its count; it may be empty
  }
  template <typename Holds>
  void check(Holds&&, const char*) {}

 private:
  size_t bytes_ = 0;
};

// The least bytes one item of a list takes, from its declaration.
template <typename T, typename Each>
size_t min_bytes_of(Each& each) {
  MinBytes m;
  const T item{};
  each(m, item);
  return m.bytes();
}

class Decode {
 public:
  explicit Decode(Reader& r) : r_(r) {}
  template <typename T>
  void num(T& v) {
    static_assert(kStoredNumber<T>);
    v = r_.num<T>();
  }
  void flag(bool& v) { v = r_.boolean(); }
  void str(std::string& s) { s = r_.str(); }
  void strs(std::vector<std::string>& v) { v = r_.strs(); }
  void index(uint32_t& v, size_t limit, const char* what) { v = r_.index(limit, what); }
  void op_kind(OpKind& k) {
    const auto stored = r_.num<uint8_t>();
    if (stored >= kNumOpKinds) r_.fail("an operator kind is unknown");
    k = static_cast<OpKind>(stored);
  }
  template <typename E, typename FromString>
  void name(E& v, FromString from_string) {
    v = from_stored(r_, from_string);
  }
  // The count is checked against what is left before anything is allocated.
  template <typename T, typename Each>
  void list(std::vector<T>& v, Each&& each) {
    v.assign(r_.count(min_bytes_of<T>(each)), T{});
    for (T& x : v) each(*this, x);
  }
  template <typename Holds>
  void check(Holds&& holds, const char* why) {
    if (!holds()) r_.fail(why);
  }

 private:
  Reader& r_;
};

// The format spelled out, one token a field ("i64", "str", "[...]" for a
// list's item), for the test that ties the format to its version.
class Layout {
 public:
  const std::string& text() const { return text_; }
  void section(const char* name) { text_ += std::string("\n") + name + ":"; }
  template <typename T>
  void num(const T&) {
    static_assert(kStoredNumber<T>);
    const char kind = std::is_floating_point_v<T> ? 'f' : std::is_signed_v<T> ? 'i' : 'u';
    token(kind + std::to_string(8 * sizeof(T)));
  }
  void flag(const bool&) { token("flag"); }
  void str(const std::string&) { token("str"); }
  void strs(const std::vector<std::string>&) { token("strs"); }
  void index(const uint32_t&, size_t, const char*) { token("index"); }
  void op_kind(const OpKind&) { token("op_kind"); }
  template <typename E, typename FromString>
  void name(const E&, FromString) {
    token("name");
  }
  template <typename T, typename Each>
  void list(const std::vector<T>&, Each&& each) {
    token("[");
    const T item{};
    each(*this, item);
    token("]");
  }
  template <typename Holds>
  void check(Holds&&, const char*) {}

 private:
  void token(const std::string& t) { text_ += " " + t; }
  std::string text_;
};

}  // namespace torchneck::run_io_detail
