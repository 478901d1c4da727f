// powercap/RAPL energy counters (trainscope/hardware/host/rapl.hpp).
#include "trainscope/hardware/host/rapl.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

namespace trainscope::host {
namespace {

namespace fs = std::filesystem;

bool is_rapl_zone(const std::string& id) {
  // "intel-rapl:0", "intel-rapl:0:1", "amd-rapl:0"; not the control type "intel-rapl".
  for (std::string_view prefix : {"intel-rapl:", "amd-rapl:"}) {
    if (id.size() > prefix.size() && id.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

// The counter of `file`, or the error naming it.
absl::StatusOr<std::uint64_t> read_counter(const std::string& file) {
  absl::StatusOr<std::string> text = ::trainscope::detail::read_whole_file(file);
  if (!text.ok()) return text.status();
  std::optional<std::uint64_t> value = parse_counter(*text);
  if (!value) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a counter ('", text->substr(0, 40), "')"));
  }
  return *value;
}

}  // namespace

std::optional<std::uint64_t> parse_counter(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0 && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  if (end == 0 || end > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::uint64_t energy_delta_uj(std::uint64_t before, std::uint64_t after,
                              std::uint64_t max_range_uj) {
  if (after >= before) return after - before;
  if (max_range_uj == 0 || before > max_range_uj) return 0;
  return (max_range_uj - before) + after + 1;
}

absl::StatusOr<RaplReader> RaplReader::Open(std::string root) {
  if (root.empty()) {
    const char* given = std::getenv(std::string(kPowercapRootEnv).c_str());
    root = given != nullptr && *given != '\0' ? given : std::string(kPowercapRoot);
  }
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return absl::NotFoundError(
        absl::StrCat("no RAPL energy: ", root,
                     " does not exist (no powercap driver, or a container without it)"));
  }
  std::vector<std::string> ids;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    const std::string id = it->path().filename().string();
    if (is_rapl_zone(id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no RAPL energy: ", root, " holds no intel-rapl:* or amd-rapl:* zone"));
  }
  RaplReader out;
  out.root_ = root;
  absl::Status first_error;
  for (const std::string& id : ids) {
    const std::string dir = root + "/" + id;
    absl::StatusOr<std::uint64_t> now = read_counter(dir + "/energy_uj");
    if (!now.ok()) {
      if (first_error.ok()) first_error = now.status();
      continue;
    }
    RaplZone zone;
    zone.id = id;
    absl::StatusOr<std::string> name = ::trainscope::detail::read_whole_file(dir + "/name");
    zone.name = name.ok() ? trimmed(*name) : id;
    absl::StatusOr<std::uint64_t> range = read_counter(dir + "/max_energy_range_uj");
    zone.max_range_uj = range.ok() ? *range : 0;
    zone.in_total = zone.name.rfind("package", 0) == 0 || zone.name == "dram";
    out.zones_.push_back(std::move(zone));
    out.last_uj_.push_back(*now);
    out.total_j_.push_back(0.0);
  }
  if (out.zones_.empty()) {
    const bool denied = first_error.code() == absl::StatusCode::kPermissionDenied;
    std::string why = absl::StrCat("no RAPL energy: ", first_error.message());
    if (denied) absl::StrAppend(&why, " (energy_uj is root-only since Linux 5.10)");
    return denied ? absl::PermissionDeniedError(why) : absl::NotFoundError(why);
  }
  return out;
}

std::vector<double> RaplReader::read_joules(std::size_t* unread) {
  std::size_t missed = 0;
  for (std::size_t i = 0; i < zones_.size(); ++i) {
    absl::StatusOr<std::uint64_t> now = read_counter(root_ + "/" + zones_[i].id + "/energy_uj");
    if (!now.ok()) {
      ++missed;
      continue;
    }
    total_j_[i] +=
        static_cast<double>(energy_delta_uj(last_uj_[i], *now, zones_[i].max_range_uj)) * 1e-6;
    last_uj_[i] = *now;
  }
  if (unread != nullptr) *unread = missed;
  return total_j_;
}

double RaplReader::total_joules(const std::vector<RaplZone>& zones,
                                const std::vector<double>& joules) {
  double sum = 0;
  for (std::size_t i = 0; i < zones.size() && i < joules.size(); ++i) {
    if (zones[i].in_total) sum += joules[i];
  }
  return sum;
}

namespace {

class RaplSource : public HardwareSource {
 public:
  explicit RaplSource(std::string root) : root_(std::move(root)) {}
  std::string name() const override { return "host.rapl"; }

  absl::Status open(const HardwareContext&) override {
    absl::StatusOr<RaplReader> reader = RaplReader::Open(root_);
    if (!reader.ok()) return reader.status();
    reader_ = std::move(reader).value();
    return absl::OkStatus();
  }

  absl::Status sample(std::vector<HardwareReading>* out) override {
    if (!reader_) return absl::FailedPreconditionError("host.rapl: not open");
    std::size_t unread = 0;
    const std::vector<double> joules = reader_->read_joules(&unread);
    if (unread == reader_->zones().size()) {
      return absl::UnavailableError(
          absl::StrCat("no RAPL zone of ", reader_->root(), " could be read"));
    }
    out->push_back({kRaplEnergyMetric, RaplReader::total_joules(reader_->zones(), joules)});
    return absl::OkStatus();
  }

 private:
  std::string root_;
  std::optional<RaplReader> reader_;
};

}  // namespace

std::unique_ptr<HardwareSource> make_rapl_source(std::string root) {
  return std::make_unique<RaplSource>(std::move(root));
}

}  // namespace trainscope::host
