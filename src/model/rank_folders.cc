#include "model/rank_folders.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>

namespace torchneck {
namespace {

namespace fs = std::filesystem;

// rank-K folders by K.
std::map<int64_t, std::string> rank_dirs(const std::string& base) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank-", 0) != 0 || name.size() == 5 || name.size() > 14) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::error_code e2;
    if (!fs::is_directory(it->path(), e2)) continue;
    out[std::stoll(name.substr(5))] = it->path().string();
  }
  return out;
}

}  // namespace

RankFolders load_rank_folders(const std::string& base, bool strict,
                              Run (*load)(const std::string& dir, std::vector<std::string>& notes)) {
  RankFolders out;
  const std::map<int64_t, std::string> dirs = rank_dirs(base);
  if (dirs.empty()) throw std::runtime_error(base + " has no rank-K folder: not a distributed run's folder");
  auto refuse = [&](const std::string& why) {
    if (strict) throw std::runtime_error(why);
    out.notes.push_back(why);
  };
  std::map<std::string, int> jobs;
  std::map<int64_t, int> sizes;
  std::vector<std::pair<int64_t, Run>> read;
  for (const auto& [k, dir] : dirs) {
    std::error_code ec;
    if (!fs::exists(dir + "/profile.spill", ec)) {
      refuse("rank " + std::to_string(k) + " left no profile in " + dir +
             " (it ended before its first spill, 1 s in, or never started)");
      continue;
    }
    try {
      Run run = load(dir, out.notes);
      if (run.rank.rank >= 0 && run.rank.rank != k) {
        refuse(dir + " holds rank " + std::to_string(run.rank.rank) + "'s profile, not rank " + std::to_string(k) + "'s");
        continue;
      }
      if (run.rank.rank < 0) run.rank.rank = k;
      ++jobs[run.rank.job];
      if (run.rank.world_size > 0) ++sizes[run.rank.world_size];
      read.emplace_back(k, std::move(run));
    } catch (const std::runtime_error& e) {
      refuse(std::string("rank ") + std::to_string(k) + "'s profile cannot be read: " + e.what());
    }
  }
  if (sizes.size() > 1) {
    std::string list;
    for (const auto& [size, n] : sizes) list += (list.empty() ? "" : ", ") + std::to_string(size);
    // Strict or not: ranks of different jobs cannot be compared.
    throw std::runtime_error("the rank folders in " + base + " name different world sizes (" + list +
                             "): they come from different jobs");
  }
  if (!sizes.empty()) out.world_size = sizes.begin()->first;
  // The job most ranks name; another job's folders are left out (or refused).
  std::string job;
  int most = 0;
  for (const auto& [j, n] : jobs)
    if (n > most) most = n, job = j;
  for (auto& [k, run] : read) {
    if (run.rank.job != job) {
      refuse(base + "/rank-" + std::to_string(k) + " is from another run (job '" + run.rank.job + "', the others '" +
             job + "'): remove it, or profile into a new folder");
      continue;
    }
    out.runs.push_back(std::move(run));
  }
  if (out.world_size > 0)
    for (int64_t k = 0; k < out.world_size; ++k)
      if (dirs.count(k) == 0)
        refuse("rank " + std::to_string(k) + " of " + std::to_string(out.world_size) + " has no folder in " + base);
  if (out.runs.empty()) throw std::runtime_error("no rank's profile in " + base + " can be read");
  return out;
}

}  // namespace torchneck
