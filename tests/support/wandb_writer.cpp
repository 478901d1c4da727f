// Writes one W&B offline run through WandbExporter, from a JSON description,
// so that tests/python/test_wandb_offline.py can read it back with the real
// wandb package. Usage: trainscope_wandb_writer SPEC.json; prints the run
// directory. The spec:
//   {"wandb_dir": str, "project": str,
//    "run": {"id", "name", "experiment", "start_time_ms", "end_time_ms",
//            "status" ("FINISHED", ...), "params": {str: str}},
//    "batches": [[{"key", "value", "step", "timestamp_ms"}, ...], ...],
//    "summary": {"has_gpu_section": bool,
//                "entries": [{"key", "device" ("CPU"/"GPU"), "mean"}]}}
#include <fstream>
#include <iostream>
#include <vector>

#include "nlohmann/json.hpp"
#include "trainscope/export/wandb_exporter.hpp"

namespace {

using trainscope::RunInfo;

RunInfo run_info(const nlohmann::json& spec) {
  RunInfo info;
  info.id = spec.at("id").get<std::string>();
  info.name = spec.at("name").get<std::string>();
  info.experiment = spec.at("experiment").get<std::string>();
  info.start_time_ms = spec.at("start_time_ms").get<std::int64_t>();
  info.params = spec.at("params").get<std::map<std::string, std::string>>();
  return info;
}

trainscope::Summary summary(const nlohmann::json& spec) {
  trainscope::Summary out;
  out.has_gpu_section = spec.at("has_gpu_section").get<bool>();
  for (const nlohmann::json& entry : spec.at("entries")) {
    trainscope::SummaryEntry e;
    e.key = entry.at("key").get<std::string>();
    e.device = entry.at("device") == "GPU" ? trainscope::Device::kGPU : trainscope::Device::kCPU;
    e.stats.mean = entry.at("mean").get<double>();
    out.entries.push_back(e);
  }
  return out;
}

int fail(const absl::Status& status) {
  std::cerr << status << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: trainscope_wandb_writer SPEC.json\n";
    return 2;
  }
  const nlohmann::json spec = nlohmann::json::parse(std::ifstream(argv[1]));
  trainscope::WandbOptions options;
  options.wandb_dir = spec.at("wandb_dir").get<std::string>();
  options.project = spec.value("project", "");
  auto exporter = trainscope::WandbExporter::Create(options);
  if (!exporter.ok()) return fail(exporter.status());

  RunInfo info = run_info(spec.at("run"));
  absl::Status status = (*exporter)->write_run_info(info);
  for (const nlohmann::json& batch : spec.at("batches")) {
    std::vector<trainscope::MetricPoint> points;
    for (const nlohmann::json& p : batch) {
      points.push_back({p.at("key").get<std::string>(), p.at("value").get<double>(),
                        p.at("step").get<std::int64_t>(), p.at("timestamp_ms").get<std::int64_t>(),
                        0});
    }
    if (status.ok()) status = (*exporter)->write_metrics(points);
  }
  if (status.ok()) status = (*exporter)->write_summary(summary(spec.at("summary")));
  if (status.ok()) status = (*exporter)->flush();
  info.end_time_ms = spec.at("run").at("end_time_ms").get<std::int64_t>();
  auto final_status = trainscope::parse_run_status(spec.at("run").at("status").get<std::string>());
  if (!final_status.ok()) return fail(final_status.status());
  info.status = *final_status;
  if (status.ok()) status = (*exporter)->write_run_info(info);
  if (!status.ok()) return fail(status);
  std::cout << (*exporter)->run_dir() << "\n";
  return 0;
}
