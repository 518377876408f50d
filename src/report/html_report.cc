#include "report/html_report.h"

#include <algorithm>
#include <stdexcept>

#include "analyze/flame.h"
#include "report/flame_json.h"
#include "report/profile_json.h"
#include "report/web_assets.h"

namespace torchneck {

std::string html_safe_json(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' && (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string hex_to_base64(std::string_view hex) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("hex_to_base64: not a hex digit");
  };
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string html_report(const std::string& profile_json, const std::string& flame_json) {
  const std::string_view js = web::report_js(), css = web::report_css();
  // The inline script and style are our own files; were either to hold the
  // sequence that ends its element, the page would break.
  if (js.find("</") != std::string_view::npos || css.find("</") != std::string_view::npos)
    throw std::runtime_error("report.html: web/report.js or web/report.css contains '</'");
  std::string data = "{\"profile\":";
  data += profile_json.empty() ? "null" : html_safe_json(profile_json);
  data += ",\"flame\":";
  data += flame_json.empty() ? "null" : html_safe_json(flame_json);
  data += "}";
  const std::string csp = "default-src 'none'; script-src 'sha256-" + hex_to_base64(web::report_js_sha256_hex()) +
                          "'; style-src 'sha256-" + hex_to_base64(web::report_css_sha256_hex()) +
                          "'; img-src data:; base-uri 'none'; form-action 'none'";
  // One pass over the template: a placeholder is only ever looked for in
  // the template, never in what was put in (the data may hold "{{").
  const std::string_view tpl = web::report_html();
  std::string out;
  out.reserve(tpl.size() + js.size() + css.size() + data.size() + csp.size());
  size_t pos = 0;
  while (true) {
    const size_t open = tpl.find("{{", pos);
    if (open == std::string_view::npos) break;
    const size_t close = tpl.find("}}", open);
    if (close == std::string_view::npos) break;
    out.append(tpl.substr(pos, open - pos));
    const std::string_view name = tpl.substr(open + 2, close - open - 2);
    if (name == "CSP") out += csp;
    else if (name == "STYLE") out.append(css);
    else if (name == "SCRIPT") out.append(js);
    else if (name == "DATA") out += data;
    else throw std::runtime_error("report.html: unknown placeholder in web/report.html");
    pos = close + 2;
  }
  out.append(tpl.substr(pos));
  return out;
}

std::string html_report_for_run(const Run& run, const Analysis& analysis, size_t max_bytes) {
  const FlameNode& flame = analysis.flame;
  ProfileJsonLimits limits;
  limits.per_step = 1000;
  limits.python = 300;
  limits.ops = 300;
  limits.layers = 300;
  limits.shapes = 3;
  size_t flame_nodes = 4000;
  std::string page;
  for (int attempt = 0; attempt < 12; ++attempt) {
    page = html_report(profile_json(run, analysis, limits), flame_json(flame, 0.0005, flame_nodes));
    if (page.size() <= max_bytes) break;
    // Too big (very long names, many rows): halve every cap and try again.
    limits.per_step = std::max<size_t>(limits.per_step / 2, 10);
    limits.python = std::max<size_t>(limits.python / 2, 5);
    limits.ops = std::max<size_t>(limits.ops / 2, 5);
    limits.layers = std::max<size_t>(limits.layers / 2, 5);
    limits.shapes = 1;
    flame_nodes = std::max<size_t>(flame_nodes / 2, 10);
  }
  return page;
}

}  // namespace torchneck
