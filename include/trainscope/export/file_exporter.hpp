#ifndef TRAINSCOPE_EXPORT_FILE_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_FILE_EXPORTER_HPP_

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "trainscope/export/exporter.hpp"
#include "trainscope/stats/stats_format.hpp"

namespace trainscope {

// Streams every region sample as CSV lines to `samples_path` (if not empty;
// header "key,device,thread,start_unix_ns,duration_ns"), appended and flushed
// at each pipeline flush, and writes each summary to `summary_path` in the
// format its extension names (.txt, .json, .csv), replacing the previous one
// atomically (write to a temporary file, then rename).
class FileExporter final : public Exporter {
 public:
  // Fails if a path's extension is unknown or the samples file cannot be opened.
  static absl::StatusOr<std::shared_ptr<FileExporter>> Create(std::string summary_path,
                                                              std::string samples_path = "");
  ~FileExporter() override;
  std::string name() const override { return "file:" + summary_path_; }
  absl::Status write_samples(absl::Span<const RegionSample> samples) override;
  absl::Status write_summary(const Summary& summary) override;
  absl::Status flush() override;

 private:
  FileExporter(std::string summary_path, StatsFormat format, std::string samples_path,
               std::FILE* samples);
  std::string summary_path_;
  StatsFormat format_;
  std::string samples_path_;
  std::FILE* samples_ = nullptr;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_FILE_EXPORTER_HPP_
