// The report page's template, script and style (web/report.{html,js,css}),
// built into the binary by cmake/embed_web.cmake: report.html needs no file
// beside the tool and no network at view time.
#pragma once

#include <string_view>

namespace torchneck::web {

std::string_view report_html();
std::string_view report_js();
std::string_view report_css();
// SHA-256 of report_js() and report_css(), 64 lowercase hex digits, for the
// page's Content-Security-Policy ('sha256-<base64>').
std::string_view report_js_sha256_hex();
std::string_view report_css_sha256_hex();

}  // namespace torchneck::web
