// A simulated libdcgm for dcgm_source_test: the DCGM C calls DcgmSource makes,
// exported under their real names with the layouts of src/dcgm_source.hpp,
// over GPUs, MIG instances and field values a test sets through the
// fake_dcgm_* control calls (the test dlopen()s this library as DcgmSource
// does, so both see one state). It checks what real DCGM checks: struct
// versions, known entities, watched fields, live-only identity fields.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hardware/gpu/dcgm_source.hpp"

namespace {

namespace dabi = trainscope::dcgm::abi;

struct Gpu {
  unsigned id;
  std::string uuid;
  unsigned nvml_index;
};

struct State {
  std::map<std::string, int> fail;   // call -> return code it gives
  std::map<std::string, int> calls;  // call -> times called
  std::vector<Gpu> gpus;
  std::vector<dabi::MigHierarchyInfoV2> instances;
  // (entity group, entity id, field) -> (value, status)
  std::map<std::tuple<unsigned, unsigned, unsigned>, std::pair<double, int>> values;
  std::map<std::pair<unsigned, unsigned>, int> watch_fail;  // entity -> code
  std::map<dabi::GroupId, std::vector<dabi::EntityPair>> groups;
  std::set<dabi::GroupId> watched;
  std::set<dabi::FieldGroupId> field_groups;
  std::set<std::string> names;
  dabi::GroupId next_id = 100;
  bool initialised = false;
  int engines = 0;
  std::string mode;
  std::string address;
  long long update_us = 0;
};

State& st() {
  static State state;
  return state;
}

// Counts the call; the code a test set for it, else OK.
int enter(const char* call) {
  ++st().calls[call];
  const auto it = st().fail.find(call);
  return it == st().fail.end() ? dabi::kOk : it->second;
}

bool known(dabi::EntityGroup group, dabi::EntityId id) {
  if (group == dabi::kEntityGpu) {
    return std::any_of(st().gpus.begin(), st().gpus.end(),
                       [&](const Gpu& g) { return g.id == id; });
  }
  if (group == dabi::kEntityGpuInstance) {
    return std::any_of(st().instances.begin(), st().instances.end(),
                       [&](const auto& e) { return e.entity.entity_id == id; });
  }
  return false;
}

bool watching(dabi::EntityGroup group, dabi::EntityId id) {
  for (dabi::GroupId g : st().watched) {
    for (const dabi::EntityPair& e : st().groups[g]) {
      if (e.entity_group == group && e.entity_id == id) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" {

// --- control ------------------------------------------------------------------

__attribute__((visibility("default"))) void fake_dcgm_reset() { st() = State(); }
__attribute__((visibility("default"))) void fake_dcgm_fail(const char* call, int rc) {
  st().fail[call] = rc;
}
__attribute__((visibility("default"))) void fake_dcgm_add_gpu(unsigned id, const char* uuid,
                                                              unsigned nvml_index) {
  st().gpus.push_back({id, uuid, nvml_index});
}
__attribute__((visibility("default"))) void fake_dcgm_add_instance(unsigned entity_id,
                                                                   unsigned gpu_id,
                                                                   unsigned gpu_instance) {
  dabi::MigHierarchyInfoV2 e{};
  e.entity = {dabi::kEntityGpuInstance, entity_id};
  e.parent = {dabi::kEntityGpu, gpu_id};
  for (const Gpu& g : st().gpus) {
    if (g.id != gpu_id) continue;
    std::strncpy(e.info.gpu_uuid, g.uuid.c_str(), sizeof(e.info.gpu_uuid) - 1);
    e.info.nvml_gpu_index = g.nvml_index;
  }
  e.info.nvml_instance_id = gpu_instance;
  e.info.nvml_compute_instance_id = ~0u;
  st().instances.push_back(e);
}
__attribute__((visibility("default"))) void fake_dcgm_set_value(unsigned group, unsigned id,
                                                                unsigned field, double value,
                                                                int status) {
  st().values[{group, id, field}] = {value, status};
}
__attribute__((visibility("default"))) void fake_dcgm_fail_watch_for(unsigned group, unsigned id,
                                                                     int rc) {
  st().watch_fail[{group, id}] = rc;
}
__attribute__((visibility("default"))) int fake_dcgm_calls(const char* call) {
  return st().calls[call];
}
__attribute__((visibility("default"))) int fake_dcgm_watching(unsigned group, unsigned id) {
  return watching(group, id) ? 1 : 0;
}
// Groups, field groups and watches still there, engines still running, and
// whether DCGM is still initialised: 0 once a user has cleaned up.
__attribute__((visibility("default"))) int fake_dcgm_open_objects() {
  return static_cast<int>(st().groups.size() + st().field_groups.size() + st().watched.size()) +
         st().engines + (st().initialised ? 1 : 0);
}
__attribute__((visibility("default"))) const char* fake_dcgm_mode() { return st().mode.c_str(); }
__attribute__((visibility("default"))) const char* fake_dcgm_address() {
  return st().address.c_str();
}
__attribute__((visibility("default"))) long long fake_dcgm_update_us() { return st().update_us; }

// --- DCGM ---------------------------------------------------------------------

__attribute__((visibility("default"))) const char* errorString(dabi::Return rc) {
  switch (rc) {
    case dabi::kProfilingNotSupported:
      return "Profiling is not supported for this group of GPUs or GPU";
    case dabi::kConnectionNotValid:
      return "Host engine connection invalid/disconnected";
    case dabi::kInitError:
      return "DCGM initialization error";
    default:
      return "Fake DCGM error";
  }
}

__attribute__((visibility("default"))) dabi::Return dcgmInit() {
  if (int rc = enter("dcgmInit"); rc != dabi::kOk) return rc;
  st().initialised = true;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmShutdown() {
  enter("dcgmShutdown");
  if (!st().initialised) return dabi::kUninitialized;
  st().initialised = false;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmConnect_v2(const char* address,
                                                                   dabi::ConnectParamsV2* params,
                                                                   dabi::Handle* handle) {
  if (int rc = enter("dcgmConnect_v2"); rc != dabi::kOk) return rc;
  if (!st().initialised) return dabi::kUninitialized;
  if (params == nullptr || params->version != dabi::kConnectParamsVersion2) {
    return dabi::kVersionMismatch;
  }
  st().address = address;
  st().mode = "standalone";
  ++st().engines;
  *handle = 7;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmDisconnect(dabi::Handle handle) {
  enter("dcgmDisconnect");
  if (handle != 7 || st().mode != "standalone") return dabi::kBadParam;
  --st().engines;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmStartEmbedded(int mode,
                                                                      dabi::Handle* handle) {
  if (int rc = enter("dcgmStartEmbedded"); rc != dabi::kOk) return rc;
  if (!st().initialised) return dabi::kUninitialized;
  if (mode != dabi::kOperationModeAuto) return dabi::kBadParam;
  st().mode = "embedded";
  ++st().engines;
  *handle = 9;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmStopEmbedded(dabi::Handle handle) {
  enter("dcgmStopEmbedded");
  if (handle != 9 || st().mode != "embedded") return dabi::kBadParam;
  --st().engines;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmGetAllSupportedDevices(dabi::Handle,
                                                                               unsigned* ids,
                                                                               int* count) {
  if (int rc = enter("dcgmGetAllSupportedDevices"); rc != dabi::kOk) return rc;
  *count = 0;
  for (const Gpu& g : st().gpus) ids[(*count)++] = g.id;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmGetGpuInstanceHierarchy(
    dabi::Handle, dabi::MigHierarchyV2* hierarchy) {
  if (int rc = enter("dcgmGetGpuInstanceHierarchy"); rc != dabi::kOk) return rc;
  if (hierarchy->version != dabi::kMigHierarchyVersion2) return dabi::kVersionMismatch;
  hierarchy->count = static_cast<unsigned>(st().instances.size());
  std::copy(st().instances.begin(), st().instances.end(), hierarchy->entity_list);
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmGroupCreate(dabi::Handle, int type,
                                                                    const char* name,
                                                                    dabi::GroupId* group) {
  if (int rc = enter("dcgmGroupCreate"); rc != dabi::kOk) return rc;
  if (type != dabi::kGroupEmpty || name == nullptr) return dabi::kBadParam;
  *group = st().next_id++;
  st().groups[*group] = {};
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmGroupDestroy(dabi::Handle,
                                                                     dabi::GroupId group) {
  enter("dcgmGroupDestroy");
  if (st().groups.erase(group) == 0) return dabi::kBadParam;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmGroupAddEntity(
    dabi::Handle, dabi::GroupId group, dabi::EntityGroup entity_group, dabi::EntityId id) {
  if (int rc = enter("dcgmGroupAddEntity"); rc != dabi::kOk) return rc;
  if (st().groups.count(group) == 0 || !known(entity_group, id)) return dabi::kBadParam;
  st().groups[group].push_back({entity_group, id});
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmFieldGroupCreate(dabi::Handle, int count,
                                                                         unsigned short* fields,
                                                                         const char* name,
                                                                         dabi::FieldGroupId* id) {
  if (int rc = enter("dcgmFieldGroupCreate"); rc != dabi::kOk) return rc;
  if (count < 1 || fields == nullptr || name == nullptr) return dabi::kBadParam;
  if (!st().names.insert(name).second) return dabi::kBadParam;  // names are unique
  *id = st().next_id++;
  st().field_groups.insert(*id);
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmFieldGroupDestroy(dabi::Handle,
                                                                          dabi::FieldGroupId id) {
  enter("dcgmFieldGroupDestroy");
  if (st().field_groups.erase(id) == 0) return dabi::kBadParam;
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmWatchFields(
    dabi::Handle, dabi::GroupId group, dabi::FieldGroupId fields, long long update_us,
    double max_keep_age, int max_keep_samples) {
  if (int rc = enter("dcgmWatchFields"); rc != dabi::kOk) return rc;
  if (st().groups.count(group) == 0 || st().field_groups.count(fields) == 0 || update_us <= 0 ||
      (max_keep_age <= 0 && max_keep_samples <= 0)) {
    return dabi::kBadParam;
  }
  for (const dabi::EntityPair& e : st().groups[group]) {
    const auto it = st().watch_fail.find({e.entity_group, e.entity_id});
    if (it != st().watch_fail.end()) return it->second;
  }
  st().update_us = update_us;
  st().watched.insert(group);
  return dabi::kOk;
}

__attribute__((visibility("default"))) dabi::Return dcgmUnwatchFields(dabi::Handle,
                                                                      dabi::GroupId group,
                                                                      dabi::FieldGroupId) {
  enter("dcgmUnwatchFields");
  if (st().watched.erase(group) == 0) return dabi::kBadParam;
  return dabi::kOk;
}

// Fills the values entity-major like DCGM, but with the entities in reverse
// order (DCGM does not promise any order).
__attribute__((visibility("default"))) dabi::Return dcgmEntitiesGetLatestValues(
    dabi::Handle, dabi::EntityPair* entities, unsigned entity_count, unsigned short* fields,
    unsigned field_count, unsigned flags, dabi::FieldValueV2* values) {
  if (int rc = enter("dcgmEntitiesGetLatestValues"); rc != dabi::kOk) return rc;
  unsigned n = 0;
  for (unsigned k = entity_count; k-- > 0;) {
    const dabi::EntityPair& e = entities[k];
    for (unsigned f = 0; f < field_count; ++f) {
      dabi::FieldValueV2& v = values[n++];
      v = dabi::FieldValueV2{};
      v.version = dabi::kFieldValueVersion2;
      v.entity_group = e.entity_group;
      v.entity_id = e.entity_id;
      v.field_id = fields[f];
      v.field_type = dabi::kTypeDouble;
      v.value.dbl = dabi::kFp64Blank;
      if (!known(e.entity_group, e.entity_id)) {
        v.status = dabi::kBadParam;
        continue;
      }
      if (fields[f] == dabi::kFieldUuid || fields[f] == dabi::kFieldNvmlIndex) {
        if ((flags & dabi::kLiveData) == 0) {
          v.status = dabi::kNotWatched;
          continue;
        }
        for (const Gpu& g : st().gpus) {
          if (e.entity_group != dabi::kEntityGpu || g.id != e.entity_id) continue;
          if (fields[f] == dabi::kFieldUuid) {
            v.field_type = dabi::kTypeString;
            std::strncpy(v.value.str, g.uuid.c_str(), sizeof(v.value.str) - 1);
          } else {
            v.field_type = dabi::kTypeInt64;
            v.value.i64 = g.nvml_index;
          }
          v.status = dabi::kOk;
        }
        continue;
      }
      if (!watching(e.entity_group, e.entity_id)) {
        v.status = dabi::kNotWatched;
        continue;
      }
      const auto it = st().values.find({e.entity_group, e.entity_id, fields[f]});
      if (it == st().values.end()) {
        v.status = dabi::kNoData;
        continue;
      }
      v.value.dbl = it->second.first;
      v.status = it->second.second;
    }
  }
  return dabi::kOk;
}

}  // extern "C"
