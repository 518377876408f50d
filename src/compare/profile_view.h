// What `torchneck diff` compares of one run: the parts of its profile.json
// (docs/profile-json.md, schema torchneck.profile/2) that say where the
// step's time went, read back with simdjson. A run folder, an `analyze`
// folder and a Kineto trace (analysed first, in memory) all give one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torchneck::compare {

// A row of a table (a layer, an operator, a Python function): its time per
// step, the run's total over its step count.
struct Row {
  std::string name;
  double ms_per_step = 0;
};

struct FindingView {
  std::string id, severity, title;
  std::optional<double> estimated_gain_pct;  // null in the profile: no gain backed
  std::optional<double> measured_gain_pct;   // run --try measured its setting (docs/try.md)
};

struct PhaseView {
  std::string name;  // data, optimizer, backward, forward, evaluation, other
  double ms = 0;     // per steady step
};

struct ProfileView {
  std::string label;   // what the user named (the folder or trace)
  std::string script;  // run.script
  std::vector<std::string> argv;
  std::string torch_version;
  int64_t step_count = 0;   // steps.count: iterations in the run
  int64_t in_window = 0;    // steps.in_window
  // The steps the layer and operator tables are over: those marked
  // `detailed` under detail windows, else every step of the window.
  int64_t detailed_steps = 0;
  double step_ms = 0;       // steps.step_ms: the steady steps' mean
  // The steady steps' durations in order (not the GPU window's), the sample
  // the interval of the change is drawn from.
  std::vector<double> steady_ms;
  std::vector<PhaseView> phases;  // steps.breakdown_ms
  std::vector<Row> layers;        // leaf layers' forward + backward, per detailed step
  std::vector<Row> ops;           // self time, per step of the run (operators: per detailed step)
  std::vector<Row> python;        // self time, per step of the run
  std::vector<FindingView> findings;
  std::string verdict;
};

// Parses profile.json's text; `label` names it in errors. Throws
// std::runtime_error with one line ("LABEL: why") when it is not JSON or not
// a torchneck profile.
ProfileView read_profile(const std::string& json_text, const std::string& label);

// The profile.json a folder holds: FOLDER/profile.json. Throws with one line
// when there is none ("not a torchneck run or analyze folder").
std::string profile_path_of_folder(const std::string& folder);

}  // namespace torchneck::compare
