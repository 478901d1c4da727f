// Renders Summaries built from arbitrary bytes in every format: nothing may
// crash or trip a sanitizer, and the JSON must always parse.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nlohmann/json.hpp"
#include "trainscope/stats/stats_format.hpp"

namespace {

using trainscope::Device;
using trainscope::StatsFormat;
using trainscope::Summary;
using trainscope::TimeStats;

// Any bit pattern, so NaN, infinities, negatives and denormals all occur.
double any_double(FuzzedDataProvider& data) {
  const std::uint64_t bits = data.ConsumeIntegral<std::uint64_t>();
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TimeStats any_stats(FuzzedDataProvider& data) {
  TimeStats s;
  s.count = data.ConsumeIntegral<std::uint64_t>();
  for (double* field : {&s.total, &s.min, &s.mean, &s.median, &s.max, &s.stdev, &s.p5, &s.p25,
                        &s.p75, &s.p95, &s.p99, &s.cv, &s.median_ci_low, &s.median_ci_high}) {
    *field = any_double(data);
  }
  s.warmup_excluded = data.ConsumeIntegral<std::uint64_t>();
  s.approximate = data.ConsumeBool();
  return s;
}

Summary any_summary(FuzzedDataProvider& data) {
  Summary summary;
  summary.has_gpu_section = data.ConsumeBool();
  const int entries = data.ConsumeIntegralInRange(0, 16);
  for (int i = 0; i < entries; ++i) {
    std::string key = data.ConsumeRandomLengthString(64);
    const Device device = data.ConsumeBool() ? Device::kGPU : Device::kCPU;
    summary.entries.push_back({std::move(key), device, any_stats(data)});
  }
  return summary;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  FuzzedDataProvider data(bytes, size);
  const std::string name = data.ConsumeRandomLengthString(32);
  (void)trainscope::parse_stats_format(name);
  (void)trainscope::stats_format_for_path(name);
  (void)trainscope::format_duration(any_double(data));

  const Summary summary = any_summary(data);
  for (StatsFormat format : {StatsFormat::kDeep500, StatsFormat::kTable, StatsFormat::kCsv}) {
    (void)trainscope::format_summary(summary, format);
  }
  const nlohmann::json doc =
      nlohmann::json::parse(trainscope::format_summary(summary, StatsFormat::kJson), nullptr,
                            /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("entries") ||
      doc.at("entries").size() != summary.entries.size()) {
    std::abort();
  }
  return 0;
}
