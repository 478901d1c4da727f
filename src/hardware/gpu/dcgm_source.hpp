// DCGM profiling fields (SM active, tensor active, DRAM active), loaded at run
// time with dlopen like NVML: no build-time dependency on DCGM. The source
// samples the GPUs and MIG instances the job uses (resolved through NVML by
// the rules NvmlSource follows) and names them as the NVML metrics.
#ifndef TRAINSCOPE_SRC_HARDWARE_GPU_DCGM_SOURCE_HPP_
#define TRAINSCOPE_SRC_HARDWARE_GPU_DCGM_SOURCE_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope::dcgm {

// DCGM's C ABI: the few types and values the source uses, declared here
// rather than taken from dcgm_agent.h / dcgm_structs.h / dcgm_fields.h.
// Layouts and values as in those headers, identical from DCGM 3.0 to 4.x
// (static_asserts in dcgm_source.cpp pin the sizes and offsets). Shared with
// the simulated library of the tests.
namespace abi {

using Return = int;                   // dcgmReturn_t
using Handle = std::uintptr_t;        // dcgmHandle_t
using GroupId = std::uintptr_t;       // dcgmGpuGrp_t
using FieldGroupId = std::uintptr_t;  // dcgmFieldGrp_t
using EntityGroup = std::uint32_t;    // dcgm_field_entity_group_t (a C enum)
using EntityId = std::uint32_t;       // dcgm_field_eid_t

// MAKE_DCGM_VERSION(type, version)
constexpr unsigned make_version(std::size_t size, unsigned version) {
  return static_cast<unsigned>(size) | (version << 24);
}

constexpr Return kOk = 0;                       // DCGM_ST_OK
constexpr Return kBadParam = -1;                // DCGM_ST_BADPARAM
constexpr Return kGenericError = -3;            // DCGM_ST_GENERIC_ERROR
constexpr Return kNotSupported = -6;            // DCGM_ST_NOT_SUPPORTED
constexpr Return kInitError = -7;               // DCGM_ST_INIT_ERROR
constexpr Return kUninitialized = -10;          // DCGM_ST_UNINITIALIZED
constexpr Return kVersionMismatch = -12;        // DCGM_ST_VER_MISMATCH
constexpr Return kNoData = -14;                 // DCGM_ST_NO_DATA
constexpr Return kNotWatched = -16;             // DCGM_ST_NOT_WATCHED
constexpr Return kNoPermission = -17;           // DCGM_ST_NO_PERMISSION
constexpr Return kGpuIsLost = -18;              // DCGM_ST_GPU_IS_LOST
constexpr Return kConnectionNotValid = -21;     // DCGM_ST_CONNECTION_NOT_VALID
constexpr Return kGpuNotSupported = -22;        // DCGM_ST_GPU_NOT_SUPPORTED
constexpr Return kRequiresRoot = -29;           // DCGM_ST_REQUIRES_ROOT
constexpr Return kModuleNotLoaded = -33;        // DCGM_ST_MODULE_NOT_LOADED
constexpr Return kInUse = -34;                  // DCGM_ST_IN_USE
constexpr Return kProfilingNotSupported = -36;  // DCGM_ST_PROFILING_NOT_SUPPORTED
constexpr Return kProfilingMultiPass = -38;     // DCGM_ST_PROFILING_MULTI_PASS
constexpr Return kInsufficientDriver = -44;     // DCGM_ST_INSUFFICIENT_DRIVER_VERSION

constexpr int kOperationModeAuto = 1;          // DCGM_OPERATION_MODE_AUTO
constexpr int kGroupEmpty = 1;                 // DCGM_GROUP_EMPTY
constexpr EntityGroup kEntityGpu = 1;          // DCGM_FE_GPU
constexpr EntityGroup kEntityGpuInstance = 4;  // DCGM_FE_GPU_I
constexpr unsigned kMaxDevices = 32;           // DCGM_MAX_NUM_DEVICES (DCGM 2.0 and later)
constexpr unsigned kMaxHierarchyInfo = kMaxDevices * 14;  // DCGM_MAX_HIERARCHY_INFO
constexpr unsigned kLiveData = 1;                         // DCGM_FV_FLAG_LIVE_DATA
constexpr unsigned short kFieldNvmlIndex = 52;            // DCGM_FI_DEV_NVML_INDEX
constexpr unsigned short kFieldUuid = 54;                 // DCGM_FI_DEV_UUID
constexpr unsigned short kFieldSmActive = 1002;           // DCGM_FI_PROF_SM_ACTIVE
constexpr unsigned short kFieldTensorActive = 1004;       // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
constexpr unsigned short kFieldDramActive = 1005;         // DCGM_FI_PROF_DRAM_ACTIVE
constexpr unsigned short kTypeDouble = 'd';               // DCGM_FT_DOUBLE
constexpr unsigned short kTypeInt64 = 'i';                // DCGM_FT_INT64
constexpr unsigned short kTypeString = 's';               // DCGM_FT_STRING
// DCGM_FP64_BLANK: this value and above mean "no value" (not found, not
// supported, no permission...).
constexpr double kFp64Blank = 140737488355328.0;
// DCGM_INT64_BLANK
constexpr std::int64_t kInt64Blank = 0x7ffffffffffffff0LL;

struct EntityPair {  // dcgmGroupEntityPair_t
  EntityGroup entity_group;
  EntityId entity_id;
};

struct ConnectParamsV2 {  // dcgmConnectV2Params_v2
  unsigned version;
  unsigned persist_after_disconnect;
  unsigned timeout_ms;
  unsigned address_is_unix_socket;
};
constexpr unsigned kConnectParamsVersion2 = make_version(sizeof(ConnectParamsV2), 2);

struct FieldValueV2 {  // dcgmFieldValue_v2
  unsigned version;
  EntityGroup entity_group;
  EntityId entity_id;
  unsigned short field_id;
  unsigned short field_type;
  int status;
  unsigned unused;
  std::int64_t timestamp_us;
  union {
    std::int64_t i64;
    double dbl;
    char str[256];    // DCGM_MAX_STR_LENGTH
    char blob[4096];  // DCGM_MAX_BLOB_LENGTH
  } value;
};
constexpr unsigned kFieldValueVersion2 = make_version(sizeof(FieldValueV2), 2);

struct MigEntityInfo {  // dcgmMigEntityInfo_t
  char gpu_uuid[128];
  unsigned nvml_gpu_index;
  unsigned nvml_instance_id;  // NVML's GPU instance id (nvmlGpuInstanceInfo_t.id)
  unsigned nvml_compute_instance_id;
  unsigned nvml_mig_profile_id;
  unsigned nvml_profile_slices;
};

struct MigHierarchyInfoV2 {  // dcgmMigHierarchyInfo_v2
  EntityPair entity;
  EntityPair parent;
  MigEntityInfo info;
};

struct MigHierarchyV2 {  // dcgmMigHierarchy_v2
  unsigned version;
  unsigned count;
  MigHierarchyInfoV2 entity_list[kMaxHierarchyInfo];
};
constexpr unsigned kMigHierarchyVersion2 = make_version(sizeof(MigHierarchyV2), 2);

}  // namespace abi

// A GPU or MIG instance the job uses, as NVML names it.
struct JobDevice {
  unsigned index = 0;                    // physical NVML index (as nvidia-smi)
  std::optional<unsigned> gpu_instance;  // NVML GPU instance id of a MIG instance
  std::string gpu_uuid;                  // the physical GPU's "GPU-..." UUID
  bool operator==(const JobDevice& o) const {
    return index == o.index && gpu_instance == o.gpu_instance && gpu_uuid == o.gpu_uuid;
  }
};

// The GPUs and MIG instances the job uses, by NvmlSource's rules:
// HardwareContext::gpu_devices if set, else CUDA_VISIBLE_DEVICES (parsed by
// nvml::parse_visible_devices; the list ends at the first entry that names no
// device), else all GPUs; a MIG-enabled GPU taken whole contributes itself and
// its instances. `api` must be initialised.
absl::StatusOr<std::vector<JobDevice>> job_devices(nvml::NvmlApi& api,
                                                   const HardwareContext& context,
                                                   const std::optional<std::string>& visible);

// Resolves the job's devices when the source opens.
using Resolver = std::function<absl::StatusOr<std::vector<JobDevice>>(const HardwareContext&)>;

// job_devices() over `api`, initialised for the call and shut down after it.
Resolver nvml_resolver(std::unique_ptr<nvml::NvmlApi> api,
                       std::optional<std::string> cuda_visible_devices);

struct DcgmOptions {
  // Tried in order; the first that dlopen() loads is used.
  std::vector<std::string> libraries = {"libdcgm.so.4", "libdcgm.so.3", "libdcgm.so"};
  // A running nv-hostengine to connect to first (as dcgmi does); empty: only
  // an embedded host engine, started in this process.
  std::string host_engine = "127.0.0.1";
  unsigned connect_timeout_ms = 1000;
  // How often DCGM updates the watched fields (dcgmi dmon's default: 1 s).
  absl::Duration update_interval = absl::Seconds(1);
};

// Samples system/gpu.<i>[.mig<gi>].{sm_active,tensor_active,dram_active}_pct
// (DCGM's ratios x 100). open() fails, which disables the source with the
// sampler's one warning, when DCGM cannot start (init, connect and embedded
// start), when no device of the job is known to DCGM, or when no device can
// be watched (e.g. DCGM_ST_PROFILING_NOT_SUPPORTED); a device DCGM lacks or
// cannot profile while others can is left out with one warning at open().
// A blank or failed value is skipped for that tick; a lost connection or GPU
// fails sample(), which disables the source.
class DcgmSource final : public HardwareSource {
 public:
  DcgmSource(std::string library, Resolver resolver, DcgmOptions options = {});
  ~DcgmSource() override;
  DcgmSource(const DcgmSource&) = delete;
  DcgmSource& operator=(const DcgmSource&) = delete;

  std::string name() const override { return kDcgmSource; }
  absl::Status open(const HardwareContext& context) override;
  absl::Status sample(std::vector<HardwareReading>* out) override;

  struct Functions;  // the resolved symbols; defined in dcgm_source.cpp
  struct Target;     // one watched GPU or MIG instance

 private:
  absl::Status load();
  absl::Status connect();
  absl::Status map_targets(const std::vector<JobDevice>& devices,
                           std::vector<std::string>* left_out);
  absl::Status watch(std::vector<std::string>* left_out);
  absl::StatusOr<abi::GroupId> watch_group(const std::vector<const Target*>& targets);
  void close();

  std::string library_;
  Resolver resolver_;
  DcgmOptions options_;
  void* handle_ = nullptr;
  std::unique_ptr<Functions> fn_;
  bool initialised_ = false;
  bool embedded_ = false;
  abi::Handle dcgm_ = 0;
  bool connected_ = false;
  std::optional<abi::FieldGroupId> field_group_;
  std::vector<abi::GroupId> groups_;  // watched
  std::vector<Target> targets_;
  std::vector<abi::EntityPair> entities_;  // targets_' entities, same order
  std::vector<abi::FieldValueV2> values_;  // entities_ x fields, reused every tick
};

// The DCGM source if one of options.libraries loads, else nullptr (no DCGM
// is the common case: no warning). GPUs are resolved through NVML.
std::unique_ptr<HardwareSource> make_dcgm_source(std::optional<std::string> cuda_visible_devices,
                                                 DcgmOptions options = {});

}  // namespace trainscope::dcgm

#endif  // TRAINSCOPE_SRC_HARDWARE_GPU_DCGM_SOURCE_HPP_
