// A small streaming JSON writer: correct escaping (any byte sequence a name
// may hold, including "</script>"), no intermediate tree. Commas and nesting
// are tracked so callers only say what comes next.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace torchneck {

class JsonWriter {
 public:
  explicit JsonWriter(int indent = 0) : indent_(indent) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(double v);  // non-finite numbers are written as null
  JsonWriter& value(bool v);
  JsonWriter& null();

  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }

 private:
  void before_value();
  JsonWriter& close(char bracket);
  void newline();

  std::string out_;
  int indent_;
  // One entry per open container: number of items written so far.
  std::vector<int> counts_;
  bool after_key_ = false;
};

// Escapes a string as a JSON string literal body (no quotes). "<" and ">"
// and "&" are escaped too, so JSON embedded in HTML can never close a tag.
void append_json_escaped(std::string& out, std::string_view s);
// True when append_json_escaped would copy s as it is.
bool is_json_plain(std::string_view s);

}  // namespace torchneck
