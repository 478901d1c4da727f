#include "trainscope/run/environment_record.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "common/json_field.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace trainscope {
namespace {

using detail::Field;

std::string string_or_empty(const Field& object, const char* key) {
  std::optional<Field> field = object.find(key);
  return field ? field->string() : std::string();
}

EnvironmentRecord from_document(const Field& root) {
  EnvironmentRecord r;
  (void)root.members();  // an object, or the error says what it is instead
  r.hostname = string_or_empty(root, "hostname");
  if (std::optional<Field> os = root.find("os")) {
    r.os = EnvironmentRecord::OperatingSystem{
        string_or_empty(*os, "sysname"), string_or_empty(*os, "release"),
        string_or_empty(*os, "version"), string_or_empty(*os, "machine")};
  }
  r.cpu_model = string_or_empty(root, "cpu_model");
  if (std::optional<Field> cores = root.find("cores")) r.cores = cores->integer(0);
  if (std::optional<Field> memory = root.find("memory_mb")) {
    const double mb = memory->number();
    if (!(mb >= 0) || mb > 9.0e15) memory->fail("not a size in MB");
    r.memory_mb = static_cast<std::int64_t>(std::llround(mb));
  }
  r.launcher = string_or_empty(root, "launcher");
  if (std::optional<Field> command = root.find("command_line")) r.command_line = command->strings();
  r.cwd = string_or_empty(root, "cwd");
  if (std::optional<Field> git = root.find("git")) {
    EnvironmentRecord::Git g;
    g.commit = (*git)["commit"].string();
    if (std::optional<Field> dirty = git->find("dirty")) g.dirty = dirty->boolean();
    r.git = std::move(g);
  }
  if (std::optional<Field> python = root.find("python")) {
    EnvironmentRecord::Python p;
    p.path = (*python)["path"].string();
    p.from = string_or_empty(*python, "from");
    if (std::optional<Field> cached = python->find("pip_freeze_cached")) {
      p.pip_freeze_cached = cached->boolean();
    }
    r.python = std::move(p);
  }
  r.pip_freeze = string_or_empty(root, "pip_freeze");
  r.conda_list = string_or_empty(root, "conda_list");
  r.nvidia_smi = string_or_empty(root, "nvidia_smi");
  r.driver_version = string_or_empty(root, "driver_version");
  r.cuda_version = string_or_empty(root, "cuda_version");
  return r;
}

}  // namespace

std::string EnvironmentRecord::hardware() const {
  std::string out = cpu_model;
  if (cores > 0) out += fmt::format("{}{} cores", out.empty() ? "" : ", ", cores);
  if (memory_mb > 0) out += fmt::format("{}{} MB", out.empty() ? "" : ", ", memory_mb);
  return out;
}

std::string format_environment_record(const EnvironmentRecord& r) {
  nlohmann::json doc = nlohmann::json::object();
  doc["hostname"] = r.hostname;
  if (r.os) {
    doc["os"] = {{"sysname", r.os->sysname},
                 {"release", r.os->release},
                 {"version", r.os->version},
                 {"machine", r.os->machine}};
  }
  doc["cpu_model"] = r.cpu_model;
  doc["cores"] = r.cores;
  doc["memory_mb"] = r.memory_mb;
  doc["launcher"] = r.launcher;
  doc["command_line"] = r.command_line;
  if (!r.cwd.empty()) doc["cwd"] = r.cwd;
  if (r.git) doc["git"] = {{"commit", r.git->commit}, {"dirty", r.git->dirty}};
  if (r.python) {
    doc["python"] = {{"path", r.python->path},
                     {"from", r.python->from},
                     {"pip_freeze_cached", r.python->pip_freeze_cached}};
  }
  for (const auto& [key, value] :
       {std::pair{"pip_freeze", &r.pip_freeze}, std::pair{"conda_list", &r.conda_list},
        std::pair{"nvidia_smi", &r.nvidia_smi}, std::pair{"driver_version", &r.driver_version},
        std::pair{"cuda_version", &r.cuda_version}}) {
    if (!value->empty()) doc[key] = *value;
  }
  // Invalid UTF-8 (a cpu model or a path from the system) is replaced, never thrown.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

absl::StatusOr<EnvironmentRecord> parse_environment_record(std::string_view text,
                                                           std::string_view source) {
  return detail::parse_document<EnvironmentRecord>(text, source, "environment", from_document);
}

}  // namespace trainscope
