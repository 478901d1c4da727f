// A grid given on the command line (`--grid k=v1,v2 --repeat 3`), and
// read_plan, which picks a reader by the file's extension.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sweep/inputs_util.hpp"
#include "trainscope/sweep/inputs.hpp"

namespace trainscope::sweep {
namespace {

using Axes = std::vector<std::pair<std::string, std::vector<std::string>>>;

// "grid-<keys>-<8 hex>": the keys for a reader, the hash of the grid (keys
// and values, in order) and the program for identity (--repeat is not part
// of it: more repetitions of a grid add to its sweep).
std::string grid_name(const Axes& axes, const std::vector<std::string>& program) {
  std::string identity;
  std::string keys;
  for (const auto& [key, values] : axes) {
    absl::StrAppend(&identity, key.size(), ":", key, "=");
    for (const std::string& value : values) absl::StrAppend(&identity, value.size(), ":", value);
    identity.push_back('\n');
    if (!keys.empty()) keys += '-';
    keys += key;
  }
  identity += "--\n";
  for (const std::string& word : program) absl::StrAppend(&identity, word.size(), ":", word);
  constexpr std::size_t kMaxKeys = 40;
  keys = detail::safe_id(keys.substr(0, kMaxKeys));
  const std::uint64_t hash = detail::stable_hash(identity);
  return absl::StrCat("grid-", axes.empty() ? "" : keys + "-",
                      detail::hex_digits(hash ^ (hash >> 32), 8));
}

}  // namespace

absl::StatusOr<Plan> grid_plan(const std::vector<std::string>& grid_specs, int repeat,
                               const std::vector<std::string>& program) {
  if (program.empty()) {
    return absl::InvalidArgumentError("a grid needs the program after `--` (-- python train.py)");
  }
  if (repeat < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--repeat ", repeat, ": must be at least 1"));
  }
  Axes axes;
  std::size_t total = static_cast<std::size_t>(repeat);
  if (total > kMaxPlanJobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--repeat ", repeat, ": more than ", kMaxPlanJobs, " jobs"));
  }
  for (const std::string& spec : grid_specs) {
    const std::size_t eq = spec.find('=');
    const std::string key(absl::StripAsciiWhitespace(spec.substr(0, eq)));
    if (eq == std::string::npos || key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--grid '", spec, "': expected key=value1,value2,..."));
    }
    for (const auto& axis : axes) {
      if (axis.first == key) {
        return absl::InvalidArgumentError(
            absl::StrCat("--grid '", spec, "': key '", key, "' is given twice"));
      }
    }
    std::vector<std::string> values;
    for (absl::string_view value : absl::StrSplit(spec.substr(eq + 1), ',')) {
      value = absl::StripAsciiWhitespace(value);
      if (value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--grid '", spec, "': key '", key, "' has an empty value"));
      }
      values.emplace_back(value);
    }
    total *= values.size();
    if (total > kMaxPlanJobs) {
      return absl::InvalidArgumentError(absl::StrCat("--grid: more than ", kMaxPlanJobs, " jobs"));
    }
    axes.emplace_back(key, std::move(values));
  }

  Plan plan;
  plan.name = grid_name(axes, program);
  detail::UniqueIds ids;
  std::vector<std::size_t> at(axes.size(), 0);
  const std::size_t combinations = total / static_cast<std::size_t>(repeat);
  for (std::size_t n = 0; n < combinations; ++n) {
    std::vector<std::pair<std::string, std::string>> params;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      params.emplace_back(axes[k].first, axes[k].second[at[k]]);
    }
    const std::string base = detail::params_id(params);
    for (int r = 0; r < repeat; ++r) {
      Job job;
      job.params = params;
      job.repeat = r;
      job.command = program;
      job.id = ids.take(repeat > 1 ? absl::StrCat(base, "-r", r) : base);
      job.source = absl::StrCat("--grid: job ", plan.jobs.size());
      plan.jobs.push_back(std::move(job));
    }
    for (std::size_t k = axes.size(); k-- > 0;) {
      if (++at[k] < axes[k].second.size()) break;
      at[k] = 0;
    }
  }
  return plan;
}

absl::StatusOr<Plan> read_plan(const std::string& path, const std::vector<std::string>& program) {
  const std::size_t dot = path.find_last_of('.');
  const std::string ext =
      dot == std::string::npos ? std::string() : absl::AsciiStrToLower(path.substr(dot));
  if (ext == ".csv") {
    if (!program.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": a radT CSV names its program in the File column; give no `-- program`"));
    }
    return read_radt_csv(path);
  }
  if (ext == ".yaml" || ext == ".yml") return read_sweep_yaml(path, program);
  if (ext == ".json") return read_furcate_json(path, program);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown sweep file type (radT .csv, radT or W&B .yaml/.yml, Furcate .json)"));
}

}  // namespace trainscope::sweep
