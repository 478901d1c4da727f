#include "hardware/gpu/dcgm_source.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>

#include "hardware/gpu/nvml_library.hpp"
#include "hardware/gpu/visible_devices.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

namespace trainscope::dcgm {

// The layouts of dcgm_structs.h (DCGM 3.0.4, 3.3.9, 4.0.0 and 4.6: identical).
namespace abi {
static_assert(sizeof(EntityPair) == 8);
static_assert(sizeof(ConnectParamsV2) == 16 && kConnectParamsVersion2 == 0x02000010u);
static_assert(sizeof(FieldValueV2) == 4128 && kFieldValueVersion2 == 0x02001020u);
static_assert(offsetof(FieldValueV2, field_id) == 12 && offsetof(FieldValueV2, status) == 16);
static_assert(offsetof(FieldValueV2, timestamp_us) == 24 && offsetof(FieldValueV2, value) == 32);
static_assert(sizeof(MigHierarchyInfoV2) == 164 && offsetof(MigHierarchyInfoV2, info) == 16);
static_assert(offsetof(MigEntityInfo, nvml_instance_id) == 132);
static_assert(sizeof(MigHierarchyV2) == 73480 && kMigHierarchyVersion2 == 0x02011f08u);
}  // namespace abi

// --- which devices the job uses ----------------------------------------------

using nvml::NvmlApi;

absl::StatusOr<std::vector<JobDevice>> job_devices(NvmlApi& api, const HardwareContext& context,
                                                   const std::optional<std::string>& visible) {
  absl::StatusOr<std::vector<nvml::SelectedDevice>> selected =
      nvml::select_devices(api, context, visible);
  if (!selected.ok()) return selected.status();
  std::vector<JobDevice> devices;
  for (const nvml::SelectedDevice& d : *selected) {
    // DCGM's ids are matched by the physical GPU's UUID.
    absl::StatusOr<nvml::Device> gpu = api.device_by_index(d.index);
    if (!gpu.ok()) return gpu.status();
    absl::StatusOr<std::string> uuid = api.uuid(*gpu);
    if (!uuid.ok()) return uuid.status();
    devices.push_back(JobDevice{d.index, d.gpu_instance, *uuid});
  }
  return devices;
}

Resolver nvml_resolver(std::unique_ptr<NvmlApi> api,
                       std::optional<std::string> cuda_visible_devices) {
  std::shared_ptr<NvmlApi> shared(std::move(api));
  return [shared, visible = std::move(cuda_visible_devices)](
             const HardwareContext& context) -> absl::StatusOr<std::vector<JobDevice>> {
    if (absl::Status status = shared->init(); !status.ok()) {
      return absl::Status(status.code(),
                          fmt::format("cannot tell which GPUs the job uses without NVML: {}",
                                      std::string(status.message())));
    }
    absl::StatusOr<std::vector<JobDevice>> devices = job_devices(*shared, context, visible);
    shared->shutdown();  // NVML counts its inits: the NVML source's stays
    return devices;
  };
}

// --- the DCGM library --------------------------------------------------------

struct DcgmSource::Functions {
  const char* (*error_string)(abi::Return) = nullptr;
  abi::Return (*init)() = nullptr;
  abi::Return (*shutdown)() = nullptr;
  abi::Return (*connect_v2)(const char*, abi::ConnectParamsV2*, abi::Handle*) = nullptr;
  abi::Return (*disconnect)(abi::Handle) = nullptr;
  abi::Return (*start_embedded)(int, abi::Handle*) = nullptr;
  abi::Return (*stop_embedded)(abi::Handle) = nullptr;
  abi::Return (*all_supported_devices)(abi::Handle, unsigned*, int*) = nullptr;
  abi::Return (*instance_hierarchy)(abi::Handle, abi::MigHierarchyV2*) = nullptr;
  abi::Return (*group_create)(abi::Handle, int, const char*, abi::GroupId*) = nullptr;
  abi::Return (*group_destroy)(abi::Handle, abi::GroupId) = nullptr;
  abi::Return (*group_add_entity)(abi::Handle, abi::GroupId, abi::EntityGroup,
                                  abi::EntityId) = nullptr;
  abi::Return (*field_group_create)(abi::Handle, int, unsigned short*, const char*,
                                    abi::FieldGroupId*) = nullptr;
  abi::Return (*field_group_destroy)(abi::Handle, abi::FieldGroupId) = nullptr;
  abi::Return (*watch_fields)(abi::Handle, abi::GroupId, abi::FieldGroupId, long long, double,
                              int) = nullptr;
  abi::Return (*unwatch_fields)(abi::Handle, abi::GroupId, abi::FieldGroupId) = nullptr;
  abi::Return (*entities_latest_values)(abi::Handle, abi::EntityPair*, unsigned, unsigned short*,
                                        unsigned, unsigned, abi::FieldValueV2*) = nullptr;
};

struct DcgmSource::Target {
  JobDevice device;
  abi::EntityPair entity{};
  std::string prefix;  // host::kGpuMetricPrefix, the index, "." (MIG: ".mig<gi>.")
  // The prefix without kSystemMetricPrefix and the trailing '.'.
  std::string label() const {
    const std::size_t system = std::strlen(kSystemMetricPrefix);
    return prefix.substr(system, prefix.size() - system - 1);
  }
};

namespace {

struct Field {
  unsigned short id;
  const char* name;
};
constexpr Field kFields[] = {{abi::kFieldSmActive, host::kGpuSmActiveQuantity},
                             {abi::kFieldTensorActive, host::kGpuTensorActiveQuantity},
                             {abi::kFieldDramActive, host::kGpuDramActiveQuantity}};
constexpr unsigned kFieldCount = sizeof(kFields) / sizeof(kFields[0]);

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, symbol));
}

const char* code_name(abi::Return rc) {
  switch (rc) {
    case abi::kBadParam:
      return "DCGM_ST_BADPARAM";
    case abi::kGenericError:
      return "DCGM_ST_GENERIC_ERROR";
    case abi::kNotSupported:
      return "DCGM_ST_NOT_SUPPORTED";
    case abi::kInitError:
      return "DCGM_ST_INIT_ERROR";
    case abi::kUninitialized:
      return "DCGM_ST_UNINITIALIZED";
    case abi::kVersionMismatch:
      return "DCGM_ST_VER_MISMATCH";
    case abi::kNoData:
      return "DCGM_ST_NO_DATA";
    case abi::kNotWatched:
      return "DCGM_ST_NOT_WATCHED";
    case abi::kNoPermission:
      return "DCGM_ST_NO_PERMISSION";
    case abi::kGpuIsLost:
      return "DCGM_ST_GPU_IS_LOST";
    case abi::kConnectionNotValid:
      return "DCGM_ST_CONNECTION_NOT_VALID";
    case abi::kGpuNotSupported:
      return "DCGM_ST_GPU_NOT_SUPPORTED";
    case abi::kRequiresRoot:
      return "DCGM_ST_REQUIRES_ROOT";
    case abi::kModuleNotLoaded:
      return "DCGM_ST_MODULE_NOT_LOADED";
    case abi::kInUse:
      return "DCGM_ST_IN_USE";
    case abi::kProfilingNotSupported:
      return "DCGM_ST_PROFILING_NOT_SUPPORTED";
    case abi::kProfilingMultiPass:
      return "DCGM_ST_PROFILING_MULTI_PASS";
    case abi::kInsufficientDriver:
      return "DCGM_ST_INSUFFICIENT_DRIVER_VERSION";
    default:
      return nullptr;
  }
}

// "<call>: <DCGM's text> (<code>)", with a hint where the code has a usual cause.
std::string describe(const DcgmSource::Functions& fn, abi::Return rc, const char* call) {
  const char* text = fn.error_string != nullptr ? fn.error_string(rc) : nullptr;
  const char* name = code_name(rc);
  std::string message = fmt::format("{}: {} ({})", call, text != nullptr ? text : "error",
                                    name != nullptr ? name : fmt::format("DCGM error {}", rc));
  switch (rc) {
    case abi::kProfilingNotSupported:
      message += "; profiling metrics are not supported on this GPU";
      break;
    case abi::kInUse:
      message += "; another profiler (Nsight, another DCGM) holds the GPU's counters";
      break;
    case abi::kRequiresRoot:
    case abi::kNoPermission:
      message += "; profiling needs root or NVreg_RestrictProfilingToAdminUsers=0";
      break;
    default:
      break;
  }
  return message;
}

// kUnavailable where DCGM or the GPU is gone: nothing more can be read.
absl::Status to_status(const DcgmSource::Functions& fn, abi::Return rc, const char* call) {
  if (rc == abi::kOk) return absl::OkStatus();
  const std::string message = describe(fn, rc, call);
  switch (rc) {
    case abi::kConnectionNotValid:
    case abi::kUninitialized:
    case abi::kGpuIsLost:
    case abi::kInitError:
      return absl::UnavailableError(message);
    case abi::kNotSupported:
    case abi::kProfilingNotSupported:
    case abi::kGpuNotSupported:
    case abi::kModuleNotLoaded:
    case abi::kInsufficientDriver:
      return absl::UnimplementedError(message);
    case abi::kNoPermission:
    case abi::kRequiresRoot:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

bool blank(double value) { return !std::isfinite(value) || value >= abi::kFp64Blank; }

// Names unique per host engine (a standalone one serves several processes).
std::string unique_name() {
  static std::atomic<unsigned> counter{0};
  return fmt::format("trainscope-{}-{}", ::getpid(), counter.fetch_add(1));
}

std::string join(const std::vector<std::string>& parts, const char* separator = "; ") {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

}  // namespace

DcgmSource::DcgmSource(std::string library, Resolver resolver, DcgmOptions options)
    : library_(std::move(library)),
      resolver_(std::move(resolver)),
      options_(std::move(options)),
      fn_(std::make_unique<Functions>()) {}

// The library stays loaded: libdcgm keeps process-wide state (and, embedded,
// module libraries) that unloading under it would not clean up.
DcgmSource::~DcgmSource() { close(); }

absl::Status DcgmSource::load() {
  if (handle_ != nullptr) return absl::OkStatus();
  handle_ = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = ::dlerror();
    return absl::NotFoundError(
        fmt::format("{} not found: {}", library_, why != nullptr ? why : "dlopen failed"));
  }
  Functions& f = *fn_;
  resolve(handle_, "errorString", &f.error_string);
  resolve(handle_, "dcgmInit", &f.init);
  resolve(handle_, "dcgmShutdown", &f.shutdown);
  resolve(handle_, "dcgmConnect_v2", &f.connect_v2);
  resolve(handle_, "dcgmDisconnect", &f.disconnect);
  resolve(handle_, "dcgmStartEmbedded", &f.start_embedded);
  resolve(handle_, "dcgmStopEmbedded", &f.stop_embedded);
  resolve(handle_, "dcgmGetAllSupportedDevices", &f.all_supported_devices);
  resolve(handle_, "dcgmGetGpuInstanceHierarchy", &f.instance_hierarchy);
  resolve(handle_, "dcgmGroupCreate", &f.group_create);
  resolve(handle_, "dcgmGroupDestroy", &f.group_destroy);
  resolve(handle_, "dcgmGroupAddEntity", &f.group_add_entity);
  resolve(handle_, "dcgmFieldGroupCreate", &f.field_group_create);
  resolve(handle_, "dcgmFieldGroupDestroy", &f.field_group_destroy);
  resolve(handle_, "dcgmWatchFields", &f.watch_fields);
  resolve(handle_, "dcgmUnwatchFields", &f.unwatch_fields);
  resolve(handle_, "dcgmEntitiesGetLatestValues", &f.entities_latest_values);
  std::vector<std::string> missing;
  const std::pair<const char*, const void*> required[] = {
      {"dcgmInit", reinterpret_cast<const void*>(f.init)},
      {"dcgmShutdown", reinterpret_cast<const void*>(f.shutdown)},
      {"dcgmStartEmbedded", reinterpret_cast<const void*>(f.start_embedded)},
      {"dcgmStopEmbedded", reinterpret_cast<const void*>(f.stop_embedded)},
      {"dcgmGetAllSupportedDevices", reinterpret_cast<const void*>(f.all_supported_devices)},
      {"dcgmGroupCreate", reinterpret_cast<const void*>(f.group_create)},
      {"dcgmGroupDestroy", reinterpret_cast<const void*>(f.group_destroy)},
      {"dcgmGroupAddEntity", reinterpret_cast<const void*>(f.group_add_entity)},
      {"dcgmFieldGroupCreate", reinterpret_cast<const void*>(f.field_group_create)},
      {"dcgmFieldGroupDestroy", reinterpret_cast<const void*>(f.field_group_destroy)},
      {"dcgmWatchFields", reinterpret_cast<const void*>(f.watch_fields)},
      {"dcgmUnwatchFields", reinterpret_cast<const void*>(f.unwatch_fields)},
      {"dcgmEntitiesGetLatestValues", reinterpret_cast<const void*>(f.entities_latest_values)}};
  for (const auto& [symbol, address] : required) {
    if (address == nullptr) missing.push_back(symbol);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("{} lacks {} (DCGM older than 3.0?)", library_, join(missing, ", ")));
  }
  return absl::OkStatus();
}

// A running nv-hostengine first (it may already profile these GPUs for
// others, and profiling counters admit one user), else an embedded engine.
absl::Status DcgmSource::connect() {
  std::string standalone_failure;
  if (!options_.host_engine.empty() && fn_->connect_v2 != nullptr) {
    abi::ConnectParamsV2 params{};
    params.version = abi::kConnectParamsVersion2;
    params.persist_after_disconnect = 0;  // our watches go with the connection
    params.timeout_ms = options_.connect_timeout_ms;
    params.address_is_unix_socket = 0;
    const abi::Return rc = fn_->connect_v2(options_.host_engine.c_str(), &params, &dcgm_);
    if (rc == abi::kOk) {
      connected_ = true;
      embedded_ = false;
      return absl::OkStatus();
    }
    standalone_failure = describe(*fn_, rc, "dcgmConnect_v2");
  }
  const abi::Return rc = fn_->start_embedded(abi::kOperationModeAuto, &dcgm_);
  if (rc == abi::kOk) {
    connected_ = true;
    embedded_ = true;
    return absl::OkStatus();
  }
  const absl::Status embedded = to_status(*fn_, rc, "dcgmStartEmbedded");
  if (standalone_failure.empty()) return embedded;
  return absl::Status(
      embedded.code(),
      fmt::format("no nv-hostengine at {} ({}) and no embedded host engine ({})",
                  options_.host_engine, standalone_failure, std::string(embedded.message())));
}

absl::Status DcgmSource::open(const HardwareContext& context) {
  if (absl::Status s = load(); !s.ok()) return s;
  if (absl::Status s = to_status(*fn_, fn_->init(), "dcgmInit"); !s.ok()) return s;
  initialised_ = true;
  absl::Status status = connect();
  absl::StatusOr<std::vector<JobDevice>> devices;
  if (status.ok()) {
    devices = resolver_(context);
    status = devices.status();
  }
  std::vector<std::string> left_out;
  if (status.ok()) status = map_targets(*devices, &left_out);
  if (status.ok()) status = watch(&left_out);
  if (!status.ok()) {
    close();  // an embedded engine's threads go now, not when the run ends
    return status;
  }
  if (!left_out.empty()) warn("dcgm: not sampled: " + join(left_out));
  return absl::OkStatus();
}

namespace {

// A GPU's DCGM id from the UUID and NVML index fields of every GPU: by UUID;
// by NVML index where DCGM gives no UUID at all.
std::optional<abi::EntityId> find_gpu(const std::vector<abi::FieldValueV2>& identity,
                                      const JobDevice& d) {
  std::optional<abi::EntityId> by_index;
  for (const abi::FieldValueV2& v : identity) {
    if (v.status != abi::kOk || v.entity_group != abi::kEntityGpu) continue;
    if (v.field_id == abi::kFieldUuid && v.field_type == abi::kTypeString &&
        std::strncmp(v.value.str, d.gpu_uuid.c_str(), sizeof(v.value.str)) == 0) {
      return v.entity_id;
    }
    if (v.field_id == abi::kFieldNvmlIndex && v.field_type == abi::kTypeInt64 &&
        v.value.i64 == static_cast<std::int64_t>(d.index)) {
      by_index = v.entity_id;
    }
  }
  const bool any_uuid = std::any_of(identity.begin(), identity.end(), [](const auto& v) {
    return v.status == abi::kOk && v.field_id == abi::kFieldUuid;
  });
  return any_uuid ? std::nullopt : by_index;
}

// A MIG instance's DCGM id: the GPU instance with its parent's UUID and its
// NVML GPU instance id.
std::optional<abi::EntityId> find_instance(const abi::MigHierarchyV2& hierarchy,
                                           const JobDevice& d) {
  for (unsigned i = 0; i < hierarchy.count; ++i) {
    const abi::MigHierarchyInfoV2& e = hierarchy.entity_list[i];
    if (e.entity.entity_group == abi::kEntityGpuInstance &&
        e.info.nvml_instance_id == *d.gpu_instance &&
        std::strncmp(e.info.gpu_uuid, d.gpu_uuid.c_str(), sizeof(e.info.gpu_uuid)) == 0) {
      return e.entity.entity_id;
    }
  }
  return std::nullopt;
}

}  // namespace

// DCGM's own ids: a GPU's by its UUID (DCGM and the job may see different
// NVML indices, e.g. a host engine outside the job's container), a MIG
// instance's by its parent's UUID and NVML GPU instance id.
absl::Status DcgmSource::map_targets(const std::vector<JobDevice>& devices,
                                     std::vector<std::string>* left_out) {
  unsigned ids[abi::kMaxDevices] = {};
  int count = 0;
  if (absl::Status s = to_status(*fn_, fn_->all_supported_devices(dcgm_, ids, &count),
                                 "dcgmGetAllSupportedDevices");
      !s.ok()) {
    return s;
  }
  count = std::clamp(count, 0, static_cast<int>(abi::kMaxDevices));
  std::vector<abi::EntityPair> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({abi::kEntityGpu, ids[i]});
  std::vector<abi::FieldValueV2> identity(gpus.size() * 2);
  unsigned short identity_fields[] = {abi::kFieldUuid, abi::kFieldNvmlIndex};
  abi::Return rc = gpus.empty() ? abi::kOk
                                : fn_->entities_latest_values(
                                      dcgm_, gpus.data(), static_cast<unsigned>(gpus.size()),
                                      identity_fields, 2, abi::kLiveData, identity.data());
  if (absl::Status s = to_status(*fn_, rc, "dcgmEntitiesGetLatestValues"); !s.ok()) return s;

  std::unique_ptr<abi::MigHierarchyV2> hierarchy;  // read when a MIG instance needs it
  const auto read_hierarchy = [&]() -> absl::Status {
    hierarchy = std::make_unique<abi::MigHierarchyV2>();
    hierarchy->version = abi::kMigHierarchyVersion2;
    if (fn_->instance_hierarchy == nullptr) {
      hierarchy->count = 0;
    } else if (absl::Status s = to_status(*fn_, fn_->instance_hierarchy(dcgm_, hierarchy.get()),
                                          "dcgmGetGpuInstanceHierarchy");
               !s.ok()) {
      return s;
    }
    hierarchy->count = std::min(hierarchy->count, abi::kMaxHierarchyInfo);
    return absl::OkStatus();
  };

  for (const JobDevice& d : devices) {
    Target t;
    t.device = d;
    t.prefix = d.gpu_instance
                   ? fmt::format("{}{}.mig{}.", host::kGpuMetricPrefix, d.index, *d.gpu_instance)
                   : fmt::format("{}{}.", host::kGpuMetricPrefix, d.index);
    std::optional<abi::EntityId> id;
    if (d.gpu_instance) {
      if (!hierarchy) {
        if (absl::Status s = read_hierarchy(); !s.ok()) return s;
      }
      id = find_instance(*hierarchy, d);
      t.entity.entity_group = abi::kEntityGpuInstance;
    } else {
      id = find_gpu(identity, d);
      t.entity.entity_group = abi::kEntityGpu;
    }
    if (!id) {
      left_out->push_back(fmt::format("{} (unknown to DCGM)", t.label()));
      continue;
    }
    t.entity.entity_id = *id;
    targets_.push_back(std::move(t));
  }
  if (targets_.empty()) {
    return absl::NotFoundError(
        fmt::format("DCGM knows none of the job's GPUs ({})", join(*left_out)));
  }
  return absl::OkStatus();
}

// A group of `targets`' entities with the profiling fields watched.
absl::StatusOr<abi::GroupId> DcgmSource::watch_group(const std::vector<const Target*>& targets) {
  abi::GroupId group = 0;
  const std::string name = unique_name();
  if (absl::Status s =
          to_status(*fn_, fn_->group_create(dcgm_, abi::kGroupEmpty, name.c_str(), &group),
                    "dcgmGroupCreate");
      !s.ok()) {
    return s;
  }
  abi::Return rc = abi::kOk;
  const char* call = "dcgmGroupAddEntity";
  for (const Target* t : targets) {
    rc = fn_->group_add_entity(dcgm_, group, t->entity.entity_group, t->entity.entity_id);
    if (rc != abi::kOk) break;
  }
  if (rc == abi::kOk) {
    call = "dcgmWatchFields";
    const double interval_s = absl::ToDoubleSeconds(options_.update_interval);
    const long long update_us =
        std::max<long long>(1000, absl::ToInt64Microseconds(options_.update_interval));
    // Keep a few intervals' worth: only the latest value is read.
    rc =
        fn_->watch_fields(dcgm_, group, *field_group_, update_us, std::max(5.0, 4 * interval_s), 4);
  }
  if (rc != abi::kOk) {
    fn_->group_destroy(dcgm_, group);
    return to_status(*fn_, rc, call);
  }
  return group;
}

// One group for all targets; if DCGM refuses it, one per target, so that a
// device that cannot be profiled (a whole MIG-enabled GPU, an older GPU next
// to newer ones) does not take the others with it.
absl::Status DcgmSource::watch(std::vector<std::string>* left_out) {
  unsigned short fields[kFieldCount];
  for (unsigned i = 0; i < kFieldCount; ++i) fields[i] = kFields[i].id;
  abi::FieldGroupId field_group = 0;
  const std::string name = unique_name();
  if (absl::Status s = to_status(*fn_,
                                 fn_->field_group_create(dcgm_, static_cast<int>(kFieldCount),
                                                         fields, name.c_str(), &field_group),
                                 "dcgmFieldGroupCreate");
      !s.ok()) {
    return s;
  }
  field_group_ = field_group;

  std::vector<const Target*> all;
  for (const Target& t : targets_) all.push_back(&t);
  absl::StatusOr<abi::GroupId> group = watch_group(all);
  if (group.ok()) {
    groups_.push_back(*group);
  } else if (absl::IsUnavailable(group.status()) || targets_.size() == 1) {
    std::vector<std::string> labels;
    for (const Target& t : targets_) labels.push_back(t.label());
    return absl::Status(group.status().code(), fmt::format("{}: {}", join(labels, ", "),
                                                           std::string(group.status().message())));
  } else {
    std::vector<Target> kept;
    std::vector<std::pair<std::string, std::string>> refused;  // (reason, device)
    absl::StatusCode code = absl::StatusCode::kOk;
    for (Target& t : targets_) {
      absl::StatusOr<abi::GroupId> one = watch_group({&t});
      if (absl::IsUnavailable(one.status())) return one.status();
      if (one.ok()) {
        groups_.push_back(*one);
        kept.push_back(std::move(t));
        continue;
      }
      if (code == absl::StatusCode::kOk) code = one.status().code();
      refused.emplace_back(std::string(one.status().message()), t.label());
    }
    // "gpu.0, gpu.1 (reason)": one entry per distinct reason.
    std::vector<std::string> reasons;
    for (std::size_t i = 0; i < refused.size(); ++i) {
      if (std::find_if(refused.begin(), refused.begin() + static_cast<std::ptrdiff_t>(i),
                       [&](const auto& r) { return r.first == refused[i].first; }) !=
          refused.begin() + static_cast<std::ptrdiff_t>(i)) {
        continue;
      }
      std::vector<std::string> labels;
      for (const auto& r : refused) {
        if (r.first == refused[i].first) labels.push_back(r.second);
      }
      reasons.push_back(fmt::format("{} ({})", join(labels, ", "), refused[i].first));
    }
    if (kept.empty()) return absl::Status(code, join(reasons));
    left_out->insert(left_out->end(), reasons.begin(), reasons.end());
    targets_ = std::move(kept);
  }
  for (const Target& t : targets_) entities_.push_back(t.entity);
  abi::FieldValueV2 blank_value{};
  blank_value.version = abi::kFieldValueVersion2;
  values_.assign(entities_.size() * kFieldCount, blank_value);
  return absl::OkStatus();
}

absl::Status DcgmSource::sample(std::vector<HardwareReading>* out) {
  if (!connected_ || entities_.empty()) return absl::FailedPreconditionError("dcgm: not open");
  unsigned short fields[kFieldCount];
  for (unsigned i = 0; i < kFieldCount; ++i) fields[i] = kFields[i].id;
  for (abi::FieldValueV2& v : values_) {
    v.version = abi::kFieldValueVersion2;
    v.status = abi::kNoData;
  }
  const abi::Return rc =
      fn_->entities_latest_values(dcgm_, entities_.data(), static_cast<unsigned>(entities_.size()),
                                  fields, kFieldCount, 0, values_.data());
  if (rc != abi::kOk) return to_status(*fn_, rc, "dcgmEntitiesGetLatestValues");
  // DCGM may reorder the entities: match each value to its target.
  for (const abi::FieldValueV2& v : values_) {
    if (v.status != abi::kOk || v.field_type != abi::kTypeDouble || blank(v.value.dbl)) continue;
    const Field* field = std::find_if(std::begin(kFields), std::end(kFields),
                                      [&](const Field& f) { return f.id == v.field_id; });
    if (field == std::end(kFields)) continue;
    for (const Target& t : targets_) {
      if (t.entity.entity_group == v.entity_group && t.entity.entity_id == v.entity_id) {
        out->push_back({t.prefix + field->name, v.value.dbl * 100.0});
        break;
      }
    }
  }
  return absl::OkStatus();
}

void DcgmSource::close() {
  if (connected_) {
    for (abi::GroupId group : groups_) {
      if (field_group_) fn_->unwatch_fields(dcgm_, group, *field_group_);
      fn_->group_destroy(dcgm_, group);
    }
    if (field_group_) fn_->field_group_destroy(dcgm_, *field_group_);
    if (embedded_) {
      fn_->stop_embedded(dcgm_);
    } else if (fn_->disconnect != nullptr) {
      fn_->disconnect(dcgm_);
    }
  }
  if (initialised_) fn_->shutdown();
  groups_.clear();
  field_group_.reset();
  targets_.clear();
  entities_.clear();
  values_.clear();
  connected_ = false;
  initialised_ = false;
}

std::unique_ptr<HardwareSource> make_dcgm_source(std::optional<std::string> cuda_visible_devices,
                                                 DcgmOptions options) {
  for (const std::string& library : options.libraries) {
    if (void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(handle);
      return std::make_unique<DcgmSource>(
          library,
          nvml_resolver(std::make_unique<nvml::DlopenNvml>(), std::move(cuda_visible_devices)),
          std::move(options));
    }
  }
  return nullptr;
}

}  // namespace trainscope::dcgm
