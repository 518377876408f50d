// What a finding is: its id (one of the table in findings.def), severity,
// the numbers it rests on, the change to make and what it should gain; and
// how its numbers are written. Both the CPU and the GPU detectors produce
// these (detectors/), and the reports print them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace torchneck {

// Ordered most important first: sorting by it puts high before medium.
enum class Severity : uint8_t { kHigh, kMedium, kLow };

// "high", "medium", "low": what profile.json and the terminal show.
const char* to_string(Severity s);

// One per line of findings.def, in its order.
enum class FindingId : uint8_t {
#define FINDING(id, severity, evidence, meaning, fires, gain) id,
#include "analyze/findings.def"
#undef FINDING
};

// A line of findings.def.
struct FindingInfo {
  FindingId id;
  const char* name;  // "input_bound": the id reports print
  Severity default_severity;
  const char* evidence;  // "CPU", "GPU", "CPU, GPU"
  const char* meaning;
  const char* fires_when;
  const char* estimated_gain;
};

// The whole table, in findings.def's order.
const std::vector<FindingInfo>& finding_table();
const FindingInfo& finding_info(FindingId id);
// nullptr for a name not in the table.
const FindingInfo* find_finding(std::string_view name);

struct Finding {
  std::string id;  // stable: FindingInfo::name, e.g. "input_bound"
  Severity severity = Severity::kMedium;
  std::string title;  // one line
  std::vector<std::string> evidence;  // the numbers it rests on
  std::string recommendation;         // the code to change
  std::optional<double> estimated_gain_pct;  // step time saved; none when it cannot be backed
  std::string gain_arithmetic;        // how the estimate was made
  // The estimate is the bottleneck removed entirely, not what the fix is
  // computed to achieve: reports say "up to", never "about".
  bool gain_is_upper_bound = false;
  // Named numbers a program reads (profile.json: keys of the finding), e.g.
  // periodic_stall's period_steps.
  std::vector<std::pair<std::string, double>> numbers;
  // How far the steps it rests on can be trusted: "high", "medium" or
  // "low", and why ("18 steps after warm-up, step time within +-4 %");
  // set for every finding by finish_diagnosis (diagnosis.h).
  std::string confidence;
  std::string confidence_basis;
  // The setting `run --try` applies to measure this finding's fix without
  // editing the script ("num_workers=4", "threads=2"); "" when it has none.
  std::string try_setting;
  // Set when `run --try` measured it (analyze/experiments.h): the step time
  // saved, in %, and its 95 % interval.
  std::optional<double> measured_gain_pct;
  double measured_gain_low = 0, measured_gain_high = 0;
  // A finding about one rank of a distributed job (straggler): which, and
  // why in one word ("input", "compute", "host"); none and "" otherwise.
  std::optional<int64_t> rank;
  std::string cause;
};

// A finding of the table's id at its default severity: how every detector
// starts one, so no id is spelled outside findings.def.
Finding make_finding(FindingId id);

// docs/findings.md: the table as Markdown.
std::string findings_markdown();

// The one way findings write their numbers.
std::string fmt_ms(int64_t ns);        // "1.16 ms", "12.3 ms", "178 ms": two decimals below 10, whole from 100
std::string fmt_pct(double fraction);  // "42.5 %"
std::string fmt_mib(double bytes);     // "12.3 MiB": two decimals below 10, whole from 100

}  // namespace torchneck
