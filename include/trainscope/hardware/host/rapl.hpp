// The CPU's energy from Linux powercap/RAPL (docs/ledger.md): the zones under
// /sys/class/powercap named intel-rapl:* (Intel, and AMD's family 17h+ through
// the same driver) or amd-rapl:*, each with its cumulative energy_uj counter
// and max_energy_range_uj, where the counter wraps to 0. The root is
// TRAINSCOPE_POWERCAP_ROOT when set (tests lay out a tree as the kernel's).
// Where nothing is readable (no powercap driver, a container without the
// tree, energy_uj root-only since Linux 5.10), Open says why, in one line.
#ifndef TRAINSCOPE_HARDWARE_HOST_RAPL_HPP_
#define TRAINSCOPE_HARDWARE_HOST_RAPL_HPP_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope::host {

inline constexpr std::string_view kPowercapRootEnv = "TRAINSCOPE_POWERCAP_ROOT";
inline constexpr std::string_view kPowercapRoot = "/sys/class/powercap";

// A counter file's text: one decimal integer, optionally followed by white
// space (a newline). nullopt for anything else (empty, a sign, a second word,
// more digits than 64 bits hold).
std::optional<std::uint64_t> parse_counter(std::string_view text);

// The energy between two readings of a counter that wraps past `max_range_uj`
// back to 0: after - before, or, when after < before, the wrap added
// (max_range_uj - before + after + 1). A max of 0 (unknown) with after <
// before is no wrap to trust: 0.
std::uint64_t energy_delta_uj(std::uint64_t before, std::uint64_t after,
                              std::uint64_t max_range_uj);

struct RaplZone {
  std::string id;    // "intel-rapl:0", "intel-rapl:0:2"
  std::string name;  // its name file: "package-0", "dram", "core", "uncore", "psys"
  std::uint64_t max_range_uj = 0;
  // Counted in the CPU's total: packages, and DRAM (measured apart from them);
  // not core/uncore (inside a package's) nor psys (the whole platform).
  bool in_total = false;
};

class RaplReader {
 public:
  // The zones of `root` (default: TRAINSCOPE_POWERCAP_ROOT, else
  // /sys/class/powercap) whose energy_uj can be read now. NotFound or
  // PermissionDenied, one line naming the path and the reason, when none can.
  static absl::StatusOr<RaplReader> Open(std::string root = {});

  const std::string& root() const noexcept { return root_; }
  const std::vector<RaplZone>& zones() const noexcept { return zones_; }

  // Reads every zone and adds what it counted since the last read (wraps
  // undone) to each zone's total; per zone the joules since Open, in zones()
  // order. A zone that cannot be read this time keeps its total (counted in
  // `unread`, when given).
  std::vector<double> read_joules(std::size_t* unread = nullptr);
  // The sum over the zones in_total of read_joules()'s figures.
  static double total_joules(const std::vector<RaplZone>& zones, const std::vector<double>& joules);

 private:
  std::string root_;
  std::vector<RaplZone> zones_;
  std::vector<std::uint64_t> last_uj_;
  std::vector<double> total_j_;
};

// A hardware source of kRaplEnergyMetric (host_metrics.hpp) reading `root`
// (as Open): its open() fails with Open's one line when nothing is readable.
std::unique_ptr<HardwareSource> make_rapl_source(std::string root = {});

// The run's tag that says, once, why the CPU's energy is not recorded.
inline constexpr std::string_view kEnergyNoteTag = "trainscope.energy.cpu";

}  // namespace trainscope::host

#endif  // TRAINSCOPE_HARDWARE_HOST_RAPL_HPP_
