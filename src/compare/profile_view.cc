#include "compare/profile_view.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "simdjson.h"

namespace torchneck::compare {
namespace {

namespace dom = simdjson::dom;

[[noreturn]] void fail(const std::string& label, const std::string& why) {
  throw std::runtime_error(label + ": " + why);
}

double number(dom::element e) {
  double d = 0;
  if (e.is_double()) return e.get_double().value();
  int64_t i = 0;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  uint64_t u = 0;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<double>(u);
  return d;
}

double number_at(dom::object o, const char* key, double otherwise = 0) {
  dom::element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return otherwise;
  return number(e);
}

std::string string_at(dom::object o, const char* key) {
  std::string_view s;
  if (o.at_key(key).get_string().get(s) != simdjson::SUCCESS) return "";
  return std::string(s);
}

dom::object object_at(dom::object o, const char* key, const std::string& label) {
  dom::object out;
  if (o.at_key(key).get_object().get(out) != simdjson::SUCCESS) fail(label, std::string("profile.json has no \"") + key + "\" object");
  return out;
}

// The elements of o[key]; none when it is missing or not an array (a
// default dom::array is no empty array: iterating one reads through null).
std::vector<dom::element> array_at(dom::object o, const char* key) {
  std::vector<dom::element> out;
  dom::array a;
  if (o.at_key(key).get_array().get(a) != simdjson::SUCCESS) return out;
  for (dom::element e : a) out.push_back(e);
  return out;
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

ProfileView read_profile(const std::string& json_text, const std::string& label) {
  dom::parser parser;
  dom::element doc;
  if (parser.parse(json_text).get(doc) != simdjson::SUCCESS) fail(label, "not JSON (a truncated or damaged profile.json?)");
  dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) fail(label, "not a torchneck profile (not a JSON object)");
  const std::string schema = string_at(root, "schema");
  if (schema.rfind("torchneck.profile/", 0) != 0)
    fail(label, "not a torchneck profile (schema \"" + schema + "\", expected torchneck.profile/2)");
  if (schema != "torchneck.profile/2")
    fail(label, "profile schema " + schema + " is not the one this torchneck reads (torchneck.profile/2)");
  ProfileView v;
  v.label = label;
  const dom::object run = object_at(root, "run", label);
  v.script = string_at(run, "script");
  for (dom::element a : array_at(run, "argv")) {
    std::string_view s;
    if (a.get_string().get(s) == simdjson::SUCCESS) v.argv.emplace_back(s);
  }
  dom::object env;
  if (root.at_key("env").get_object().get(env) == simdjson::SUCCESS) v.torch_version = string_at(env, "torch");

  const dom::object steps = object_at(root, "steps", label);
  v.step_count = static_cast<int64_t>(number_at(steps, "count"));
  v.in_window = static_cast<int64_t>(number_at(steps, "in_window"));
  v.step_ms = number_at(steps, "step_ms");
  dom::object breakdown;
  if (steps.at_key("breakdown_ms").get_object().get(breakdown) == simdjson::SUCCESS)
    for (auto [key, value] : breakdown) v.phases.push_back({std::string(key), number(value)});
  // Under detail windows (steps.detail "window", docs/overhead.md) the
  // layer table and the operators are recorded in the detailed steps only:
  // their totals are over those, and two runs' windows differ in number
  // (the policy sizes them by what detail costs each script).
  const bool windows = string_at(steps, "detail") == "window";
  int64_t detailed = 0;
  for (dom::element e : array_at(steps, "per_step")) {
    dom::object s;
    if (e.get_object().get(s) != simdjson::SUCCESS) continue;
    bool is_detailed = true;
    if (s.at_key("detailed").get_bool().get(is_detailed) != simdjson::SUCCESS) is_detailed = true;
    detailed += is_detailed;
    bool steady = false, window = false;
    if (s.at_key("steady").get_bool().get(steady) != simdjson::SUCCESS) steady = false;
    if (s.at_key("gpu_window").get_bool().get(window) != simdjson::SUCCESS) window = false;
    if (steady && !window) v.steady_ms.push_back(number_at(s, "ms"));
  }

  const double run_steps = static_cast<double>(std::max<int64_t>(1, v.step_count));
  v.detailed_steps = windows ? detailed : v.in_window;
  const double detailed_steps = static_cast<double>(std::max<int64_t>(1, v.detailed_steps));
  for (dom::element e : array_at(root, "layers")) {
    dom::object l;
    if (e.get_object().get(l) != simdjson::SUCCESS) continue;
    // Leaves only: a container's time is its children's, counted again.
    bool leaf = true;
    if (l.at_key("leaf").get_bool().get(leaf) != simdjson::SUCCESS) leaf = true;
    if (!leaf) continue;
    v.layers.push_back({string_at(l, "name"), (number_at(l, "forward_ms") + number_at(l, "backward_ms")) / detailed_steps});
  }
  for (dom::element e : array_at(root, "ops")) {
    dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) continue;
    // Scopes (a DataLoader fetch, the backward pass, Optimizer.step, the
    // user's record_function: kind user_scope) are recorded in every step;
    // operators, autograd's backward functions and TorchScript functions in
    // the detailed ones (op_observer.cc's light and main callbacks).
    const bool every_step = !windows || string_at(o, "kind") == "user_scope";
    v.ops.push_back({string_at(o, "name"), number_at(o, "self_ms") / (every_step ? run_steps : detailed_steps)});
  }
  for (dom::element e : array_at(root, "python")) {
    dom::object f;
    if (e.get_object().get(f) != simdjson::SUCCESS) continue;
    // No line number: an edit above a function moves its line, not its identity.
    v.python.push_back({base_name(string_at(f, "file")) + "(" + string_at(f, "function") + ")",
                        number_at(f, "self_ms") / run_steps});
  }
  for (dom::element e : array_at(root, "findings")) {
    dom::object f;
    if (e.get_object().get(f) != simdjson::SUCCESS) continue;
    FindingView fv{string_at(f, "id"), string_at(f, "severity"), string_at(f, "title"), std::nullopt, std::nullopt};
    dom::element g;
    if (f.at_key("estimated_gain_pct").get(g) == simdjson::SUCCESS && !g.is_null()) fv.estimated_gain_pct = number(g);
    if (f.at_key("measured_gain_pct").get(g) == simdjson::SUCCESS && !g.is_null()) fv.measured_gain_pct = number(g);
    v.findings.push_back(std::move(fv));
  }
  v.verdict = string_at(root, "verdict");
  return v;
}

std::string profile_path_of_folder(const std::string& folder) {
  const std::string path = folder + "/profile.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error(folder + ": not a torchneck run or analyze folder (it has no profile.json)");
  return path;
}

}  // namespace torchneck::compare
