#include "trainscope/timing/timer.hpp"
#include "common/files.hpp"

namespace trainscope {

absl::Status Timer::try_get_time(Key key, std::vector<double>* out) const {
  return core_.samples_seconds(key, Device::kCPU, out);
}

std::vector<double> Timer::get_time(Key key) const {
  std::vector<double> out;
  detail::throw_if_error(try_get_time(key, &out));
  return out;
}

absl::Status Timer::try_save_all_time_stats(std::string_view path) const {
  absl::StatusOr<StatsFormat> format = stats_format_for_path(path);
  if (!format.ok()) return format.status();
  return detail::write_new_file(path, format_all_time_stats(*format));
}

}  // namespace trainscope
