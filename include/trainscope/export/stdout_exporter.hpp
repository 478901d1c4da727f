#ifndef TRAINSCOPE_EXPORT_STDOUT_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_STDOUT_EXPORTER_HPP_

#include <cstdio>
#include <string>

#include "trainscope/export/exporter.hpp"
#include "trainscope/stats/stats_format.hpp"

namespace trainscope {

// Prints end-of-run summaries (Deep500 text by default) to a C stream.
class StdoutExporter final : public Exporter {
 public:
  explicit StdoutExporter(StatsFormat format = StatsFormat::kDeep500, std::FILE* stream = stdout)
      : format_(format), stream_(stream) {}
  std::string name() const override { return "stdout"; }
  absl::Status write_summary(const Summary& summary) override;
  absl::Status flush() override;

 private:
  StatsFormat format_;
  std::FILE* stream_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_STDOUT_EXPORTER_HPP_
