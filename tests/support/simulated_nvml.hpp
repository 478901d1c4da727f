// A simulated NVML behind NvmlApi for the NVML and DCGM source tests: GPUs
// with UUIDs, MIG instances, every metric as a field, failures per call.
#ifndef TRAINSCOPE_TESTS_SUPPORT_SIMULATED_NVML_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_SIMULATED_NVML_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hardware/gpu/nvml_source.hpp"

namespace trainscope::nvml {

constexpr std::uint64_t kMiB = 1024 * 1024;

// One simulated GPU or MIG instance; tests change its fields between ticks.
struct SimDevice {
  std::string uuid;
  Utilization utilization{50, 20};
  MemoryInfo memory{16384 * kMiB, 4096 * kMiB};
  unsigned power_mw = 120500;
  std::uint64_t energy_mj = 7000000;
  unsigned temperature_c = 61;
  unsigned sm_clock_mhz = 1410;
  unsigned mem_clock_mhz = 1215;
  unsigned pcie_tx_kb_s = 2048;
  unsigned pcie_rx_kb_s = 4096;
  std::uint64_t throttle_reasons = 0x4;
  std::vector<ProcessMemory> processes;
  std::vector<ProcessUtilization> process_samples;
  unsigned gpu_instance = 0;                     // for a MIG instance
  std::vector<std::unique_ptr<SimDevice>> migs;  // MIG mode is on when non-empty
  std::map<std::string, absl::Status> failures;  // call name → error it returns
};

class SimulatedNvml final : public NvmlApi {
 public:
  explicit SimulatedNvml(int devices) {
    for (int i = 0; i < devices; ++i) {
      devices_.push_back(std::make_unique<SimDevice>());
      devices_.back()->uuid = "GPU-" + std::string(8, static_cast<char>('a' + i)) + "-1111";
    }
  }
  SimDevice& device(int i) { return *devices_[i]; }
  SimDevice& add_mig(int gpu, unsigned gi, std::string uuid) {
    auto mig = std::make_unique<SimDevice>();
    mig->uuid = std::move(uuid);
    mig->gpu_instance = gi;
    // As on real hardware: an instance reports memory and processes only.
    for (const char* call : {"utilization", "power_mw", "energy_mj", "temperature_c", "clock_mhz",
                             "pcie_kb_s", "throttle_reasons", "process_utilization"}) {
      mig->failures[call] = absl::UnimplementedError("Not Supported");
    }
    devices_[gpu]->migs.push_back(std::move(mig));
    devices_[gpu]->failures["utilization"] = absl::UnimplementedError("Not Supported");
    return *devices_[gpu]->migs.back();
  }
  absl::Status init_status = absl::OkStatus();
  int live_inits = 0;  // init() calls not yet matched by shutdown()

  absl::Status init() override {
    if (init_status.ok()) ++live_inits;
    return init_status;
  }
  void shutdown() override { --live_inits; }
  absl::StatusOr<unsigned> device_count() override {
    return static_cast<unsigned>(devices_.size());
  }
  absl::StatusOr<Device> device_by_index(unsigned index) override {
    if (index >= devices_.size()) return absl::InvalidArgumentError("index");
    return static_cast<Device>(devices_[index].get());
  }
  absl::StatusOr<std::string> uuid(Device d) override { return sim(d).uuid; }
  absl::StatusOr<Utilization> utilization(Device d) override {
    return read(d, "utilization", sim(d).utilization);
  }
  absl::StatusOr<MemoryInfo> memory(Device d) override { return read(d, "memory", sim(d).memory); }
  absl::StatusOr<unsigned> power_mw(Device d) override {
    return read(d, "power_mw", sim(d).power_mw);
  }
  absl::StatusOr<std::uint64_t> energy_mj(Device d) override {
    return read(d, "energy_mj", sim(d).energy_mj);
  }
  absl::StatusOr<unsigned> temperature_c(Device d) override {
    return read(d, "temperature_c", sim(d).temperature_c);
  }
  absl::StatusOr<unsigned> clock_mhz(Device d, Clock clock) override {
    return read(d, "clock_mhz", clock == Clock::kSm ? sim(d).sm_clock_mhz : sim(d).mem_clock_mhz);
  }
  absl::StatusOr<unsigned> pcie_kb_s(Device d, PcieDirection direction) override {
    return read(d, "pcie_kb_s",
                direction == PcieDirection::kTx ? sim(d).pcie_tx_kb_s : sim(d).pcie_rx_kb_s);
  }
  absl::StatusOr<std::uint64_t> throttle_reasons(Device d) override {
    return read(d, "throttle_reasons", sim(d).throttle_reasons);
  }
  absl::StatusOr<std::vector<ProcessMemory>> compute_processes(Device d) override {
    return read(d, "compute_processes", sim(d).processes);
  }
  // NVML's contract: samples newer than `since_us`, kNotFound when none.
  absl::StatusOr<std::vector<ProcessUtilization>> process_utilization(
      Device d, std::uint64_t since_us) override {
    absl::StatusOr<std::vector<ProcessUtilization>> all =
        read(d, "process_utilization", sim(d).process_samples);
    if (!all.ok()) return all;
    std::vector<ProcessUtilization> newer;
    for (const ProcessUtilization& s : *all) {
      if (s.timestamp_us > since_us) newer.push_back(s);
    }
    if (newer.empty()) return absl::NotFoundError("no samples");
    return newer;
  }
  absl::StatusOr<bool> mig_enabled(Device d) override { return !sim(d).migs.empty(); }
  absl::StatusOr<unsigned> max_mig_devices(Device) override { return 7; }
  absl::StatusOr<Device> mig_device(Device d, unsigned index) override {
    if (index >= sim(d).migs.size()) return absl::NotFoundError("no instance");
    return static_cast<Device>(sim(d).migs[index].get());
  }
  absl::StatusOr<unsigned> gpu_instance_id(Device d) override { return sim(d).gpu_instance; }

 private:
  static SimDevice& sim(Device d) { return *static_cast<SimDevice*>(const_cast<void*>(d)); }
  template <typename T>
  static absl::StatusOr<T> read(Device d, const char* call, const T& value) {
    const auto it = sim(d).failures.find(call);
    if (it != sim(d).failures.end()) return it->second;
    return value;
  }
  std::vector<std::unique_ptr<SimDevice>> devices_;
};

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_TESTS_SUPPORT_SIMULATED_NVML_HPP_
