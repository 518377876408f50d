#include "compare/diff_report.h"

#include <algorithm>
#include <cmath>

#include "report/appendf.h"
#include "report/json_writer.h"
#include "report/printable.h"
#include "report/web_assets.h"

namespace torchneck::compare {
namespace {

std::string pct(double v) {
  std::string s;
  appendf(s, "%+.1f %%", v);
  return s;
}

std::string ms(double v) {
  std::string s;
  appendf(s, std::fabs(v) >= 100 ? "%.0f ms" : std::fabs(v) >= 10 ? "%.1f ms" : "%.2f ms", v);
  return s;
}

std::string signed_ms(double v) { return (v >= 0 ? "+" : "") + ms(v); }

const Mover* top_phase(const RunDiff& d) {
  const Mover* best = nullptr;
  for (const Mover& m : d.phases)
    if (best == nullptr || std::fabs(m.delta_ms) > std::fabs(best->delta_ms)) best = &m;
  return best;
}

std::string measured_vs_estimate(const RunDiff& d, const FindingChange& f) {
  if (f.state != FindingState::kResolved) return "";
  std::string s = f.estimated_change_pct ? "estimated " + pct(*f.estimated_change_pct) : "no gain estimated";
  if (f.try_change_pct) s += ", measured by --try " + pct(*f.try_change_pct);
  return s + ", measured " + pct(d.change_pct);
}

// Markup characters as entities; controls, bidi controls and invalid UTF-8
// as printable_text shows them, so that a name cannot reorder the page's text.
std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : printable_text(s)) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

void write_movers(JsonWriter& w, const char* key, const std::vector<Mover>& rows) {
  w.key(key).begin_array();
  for (const Mover& m : rows)
    w.begin_object()
        .field("name", m.name)
        .field("before_ms", m.before_ms)
        .field("after_ms", m.after_ms)
        .field("delta_ms", m.delta_ms)
        .field("in_before", m.in_before)
        .field("in_after", m.in_after)
        .end_object();
  w.end_array();
}

void write_side(JsonWriter& w, const char* key, const ProfileView& p, size_t steps, double mean_ms) {
  w.key(key).begin_object();
  w.field("label", p.label);
  w.field("script", p.script);
  w.field("torch", p.torch_version);
  w.field("steps", p.step_count);
  w.field("steady_steps", static_cast<uint64_t>(steps));
  w.field("step_ms", mean_ms);
  w.field("verdict", p.verdict);
  w.end_object();
}

void text_table(std::string& out, const char* title, const std::vector<Mover>& rows) {
  if (rows.empty()) return;
  appendf(out, "\n%s\n  %-52s %10s %10s %10s\n", title, "name", "before", "after", "change");
  for (const Mover& m : rows) {
    std::string name = m.name.size() > 52 ? m.name.substr(0, 49) + "..." : m.name;
    appendf(out, "  %-52s %10s %10s %10s\n", name.c_str(), m.in_before ? ms(m.before_ms).c_str() : "-",
            m.in_after ? ms(m.after_ms).c_str() : "-", signed_ms(m.delta_ms).c_str());
  }
}

void html_table(std::string& out, const char* title, const std::vector<Mover>& rows) {
  out += "<h2>" + std::string(title) + "</h2>";
  if (rows.empty()) {
    out += "<div class=\"empty\">nothing to compare</div>";
    return;
  }
  double widest = 0;
  for (const Mover& m : rows) widest = std::max(widest, std::fabs(m.delta_ms));
  out += "<table><thead><tr><th>name</th><th>before</th><th>after</th><th>change</th><th></th></tr></thead><tbody>";
  for (const Mover& m : rows) {
    const double w = widest > 0 ? 120.0 * std::fabs(m.delta_ms) / widest : 0;
    std::string bar;
    appendf(bar, "<svg width=\"122\" height=\"10\"><rect x=\"1\" y=\"1\" width=\"%.1f\" height=\"8\" fill=\"%s\"/></svg>", w,
            m.delta_ms > 0 ? "#c0392b" : "#1e8449");
    out += "<tr><td>" + html_escape(m.name) + "</td><td>" + (m.in_before ? ms(m.before_ms) : "-") + "</td><td>" +
           (m.in_after ? ms(m.after_ms) : "-") + "</td><td>" + signed_ms(m.delta_ms) + "</td><td>" + bar + "</td></tr>";
  }
  out += "</tbody></table>";
}

// Each run's steady steps in order, one dot per step, on one time axis.
std::string steps_svg(const RunDiff& d) {
  double top = 0;
  for (double x : d.before.steady_ms) top = std::max(top, x);
  for (double x : d.after.steady_ms) top = std::max(top, x);
  if (top <= 0) return "<div class=\"empty\">no steady steps</div>";
  const size_t n = std::max(d.before.steady_ms.size(), d.after.steady_ms.size());
  const double width = 800, height = 160;
  std::string out;
  appendf(out, "<div class=\"chart\"><svg width=\"%.0f\" height=\"%.0f\" role=\"img\">", width + 60, height + 20);
  appendf(out, "<text x=\"0\" y=\"10\">%s</text><text x=\"0\" y=\"%.0f\">0</text>", ms(top).c_str(), height);
  auto dots = [&](const std::vector<double>& v, const char* color) {
    for (size_t i = 0; i < v.size(); ++i)
      appendf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>",
              50 + width * static_cast<double>(i) / static_cast<double>(std::max<size_t>(1, n - 1)),
              height - height * v[i] / top, color);
  };
  dots(d.before.steady_ms, "#5d6873");
  dots(d.after.steady_ms, "#2874a6");
  out += "</svg></div><div class=\"legend\"><span><span class=\"sw\" style=\"background:#5d6873\"></span>before</span>"
         "<span><span class=\"sw\" style=\"background:#2874a6\"></span>after</span></div>";
  return out;
}

}  // namespace

std::string diff_verdict(const RunDiff& d) {
  std::string s;
  if (!d.ci95_pct)
    return "Cannot tell a change from noise: the step time moved " + pct(d.change_pct) + ", with " +
           no_interval_reason(d) + ".";
  const Interval& ci = *d.ci95_pct;
  if (!d.significant) {
    appendf(s, "No significant change: the step time moved %s (95 %% interval %s .. %s)", pct(d.change_pct).c_str(),
            pct(ci.low).c_str(), pct(ci.high).c_str());
    if (std::fabs(d.change_pct) < d.noise_floor_pct && (ci.low > 0 || ci.high < 0))
      appendf(s, ", below the %g %% noise floor (two runs of one script differ by as much on a drifting machine)",
              d.noise_floor_pct);
    return s + ".";
  }
  appendf(s, "%s: the step takes %s instead of %s, %s (95 %% interval %s .. %s)",
          d.change_pct < 0 ? "Faster" : "Slower", ms(d.after_ms).c_str(), ms(d.before_ms).c_str(),
          pct(d.change_pct).c_str(), pct(ci.low).c_str(), pct(ci.high).c_str());
  if (const Mover* p = top_phase(d); p != nullptr && p->delta_ms != 0)
    s += "; the " + p->name + " phase moved most (" + signed_ms(p->delta_ms) + " of " +
         signed_ms(d.after_ms - d.before_ms) + " per step)";
  return s + ".";
}

std::string diff_text(const RunDiff& d) {
  std::string out;
  appendf(out, "torchneck diff\n  before: %s (%s): %zu steady steps, %s a step\n  after:  %s (%s): %zu steady steps, %s a step\n",
          d.before.label.c_str(), d.before.script.c_str(), d.before_steps, ms(d.before_ms).c_str(), d.after.label.c_str(),
          d.after.script.c_str(), d.after_steps, ms(d.after_ms).c_str());
  out += "\nVERDICT: " + diff_verdict(d) + "\n";
  appendf(out, "  interval: %s\n", d.method.c_str());
  text_table(out, "Phases, ms per step", d.phases);
  text_table(out, "Layers that moved most (forward + backward, ms per step)", d.layers);
  text_table(out, "Operators that moved most (self time, ms per step)", d.ops);
  text_table(out, "Python functions that moved most (self time, ms per step)", d.python);
  out += "\nFindings (medium or high; \"measured\" is the whole change between the two runs)\n";
  if (d.findings.empty()) out += "  none in either run\n";
  for (const FindingChange& f : d.findings) {
    const std::string sev = f.state == FindingState::kNew    ? f.severity_after
                            : f.state == FindingState::kKept ? f.severity_before + " -> " + f.severity_after
                                                             : f.severity_before;
    appendf(out, "  %-9s %s [%s]: %s\n", state_name(f.state), f.id.c_str(), sev.c_str(), f.title.c_str());
    const std::string gain = measured_vs_estimate(d, f);
    if (!gain.empty()) appendf(out, "            %s\n", gain.c_str());
  }
  if (!d.notes.empty()) {
    out += "\nNotes\n";
    for (const std::string& n : d.notes) out += "  " + n + "\n";
  }
  return printable_text(out);
}

std::string diff_json(const RunDiff& d) {
  JsonWriter w(1);
  w.begin_object();
  w.field("schema", kDiffSchema);
  write_side(w, "before", d.before, d.before_steps, d.before_ms);
  write_side(w, "after", d.after, d.after_steps, d.after_ms);
  w.field("same_script", d.same_script);
  w.field("step_change_pct", d.change_pct);
  w.key("ci95_pct");
  d.ci95_pct ? w.begin_array().value(d.ci95_pct->low).value(d.ci95_pct->high).end_array() : w.null();
  w.field("significant", d.significant);
  w.field("floor_pct", d.noise_floor_pct);
  w.field("method", d.method);
  w.key("block_length");
  d.ci95_pct ? w.value(static_cast<int64_t>(d.block_length)) : w.null();
  w.field("verdict", diff_verdict(d));
  write_movers(w, "phases", d.phases);
  write_movers(w, "layers", d.layers);
  write_movers(w, "ops", d.ops);
  write_movers(w, "python", d.python);
  w.key("findings").begin_object();
  for (FindingState s : {FindingState::kResolved, FindingState::kNew, FindingState::kKept}) {
    w.key(state_name(s)).begin_array();
    for (const FindingChange& f : d.findings)
      if (f.state == s) w.value(f.id);
    w.end_array();
  }
  w.key("details").begin_array();
  for (const FindingChange& f : d.findings) {
    w.begin_object();
    w.field("id", f.id);
    w.field("state", state_name(f.state));
    w.field("severity_before", f.severity_before);
    w.field("severity_after", f.severity_after);
    w.field("title", f.title);
    w.key("estimated_change_pct");
    f.estimated_change_pct ? w.value(*f.estimated_change_pct) : w.null();
    w.key("try_change_pct");
    f.try_change_pct ? w.value(*f.try_change_pct) : w.null();
    w.key("measured_change_pct");
    f.state == FindingState::kResolved ? w.value(d.change_pct) : w.null();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.key("notes").begin_array();
  for (const std::string& n : d.notes) w.value(n);
  w.end_array();
  w.end_object();
  return w.str() + "\n";
}

std::string diff_html(const RunDiff& d) {
  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>torchneck diff</title><style>";
  out += std::string(web::report_css());
  out += "table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid var(--line);"
         "text-align:right}td:first-child,th:first-child{text-align:left}</style></head><body>";
  out += "<h1>torchneck diff</h1>";
  appendf(out, "<p class=\"muted\">before: <bdi>%s</bdi> (<bdi>%s</bdi>), %zu steady steps, %s a step</p>",
          html_escape(d.before.label).c_str(), html_escape(d.before.script).c_str(), d.before_steps,
          ms(d.before_ms).c_str());
  appendf(out, "<p class=\"muted\">after: <bdi>%s</bdi> (<bdi>%s</bdi>), %zu steady steps, %s a step</p>",
          html_escape(d.after.label).c_str(), html_escape(d.after.script).c_str(), d.after_steps,
          ms(d.after_ms).c_str());
  out += "<div id=\"verdict\">" + html_escape(diff_verdict(d)) + "</div>";
  out += "<p class=\"muted\">" + html_escape(d.method) + "</p>";
  out += "<h2>Steady steps</h2>" + steps_svg(d);
  html_table(out, "Phases, ms per step", d.phases);
  html_table(out, "Layers that moved most", d.layers);
  html_table(out, "Operators that moved most", d.ops);
  html_table(out, "Python functions that moved most", d.python);
  out += "<h2>Findings (medium or high)</h2><p class=\"muted\">\"measured\" is the whole change between the two "
         "runs</p>";
  if (d.findings.empty()) out += "<div class=\"empty\">none in either run</div>";
  else out += "<table><thead><tr><th>state</th><th>finding</th><th>title</th><th>gain</th></tr></thead><tbody>";
  for (const FindingChange& f : d.findings)
    out += "<tr><td>" + std::string(state_name(f.state)) + "</td><td>" + html_escape(f.id) + "</td><td>" +
           html_escape(f.title) + "</td><td>" + html_escape(measured_vs_estimate(d, f)) + "</td></tr>";
  if (!d.findings.empty()) out += "</tbody></table>";
  if (!d.notes.empty()) {
    out += "<h2>Notes</h2><ul>";
    for (const std::string& n : d.notes) out += "<li>" + html_escape(n) + "</li>";
    out += "</ul>";
  }
  return out + "</body></html>\n";
}

}  // namespace torchneck::compare
