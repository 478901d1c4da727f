// The names of the host readings every reader interprets: the host sources
// write them (src/hardware/host/host_sources.cpp), the steps room reads them
// (trainscope/steps/steps.hpp: the job's CPU, other processes' CPU, cores,
// memory, swap). docs/hardware-metrics.md lists every reading.
#ifndef TRAINSCOPE_HARDWARE_HOST_HOST_METRICS_HPP_
#define TRAINSCOPE_HARDWARE_HOST_HOST_METRICS_HPP_

#include "trainscope/export/run_record.hpp"

namespace trainscope::host {

// Every hardware reading's key starts so: the run record's prefix (defined in
// the export room, the lowest that needs it: the MLflow exporter).
using ::trainscope::kSystemMetricPrefix;
// The bytes the rank's process tree read from storage, in MB (cumulative).
inline constexpr char kProcReadMbMetric[] = "system/proc.read_mb";

// The rest of what the host sources write (hardware/host/host_sources.cpp), each
// defined here once, beside the ones the readers interpret.
inline constexpr char kMemTotalMbMetric[] = "system/mem.total_mb";
inline constexpr char kMemUsedMbMetric[] = "system/mem.used_mb";
inline constexpr char kMemAvailableMbMetric[] = "system/mem.available_mb";
inline constexpr char kMemFreeMbMetric[] = "system/mem.free_mb";
inline constexpr char kMemBuffersMbMetric[] = "system/mem.buffers_mb";
inline constexpr char kMemCachedMbMetric[] = "system/mem.cached_mb";
inline constexpr char kSwapTotalMbMetric[] = "system/swap.total_mb";
inline constexpr char kProcReadMbPerSecMetric[] = "system/proc.read_mb_s";
inline constexpr char kProcWriteMbPerSecMetric[] = "system/proc.write_mb_s";
inline constexpr char kProcWriteMbMetric[] = "system/proc.write_mb";
inline constexpr char kProcCountMetric[] = "system/proc.count";
// The disks': "system/disk.<quantity>" for all physical disks summed,
// "system/disk.<device>.<quantity>" per device; stalls reads the summed read rate.
inline constexpr char kDiskFamily[] = "disk";
inline constexpr char kReadMbPerSecQuantity[] = "read_mb_s";
inline constexpr char kWriteMbPerSecQuantity[] = "write_mb_s";
// The network interfaces': "system/net.<quantity>" summed, "system/net.<iface>.<quantity>".
inline constexpr char kNetFamily[] = "net";
inline constexpr char kRxMbPerSecQuantity[] = "rx_mb_s";
inline constexpr char kTxMbPerSecQuantity[] = "tx_mb_s";
inline constexpr char kDiskReadMbPerSecMetric[] = "system/disk.read_mb_s";
// The whole host's CPU busy, in % of all its cores.
inline constexpr char kCpuUtilMetric[] = "system/cpu.util_pct";
// One core's: "system/cpu.<core>.util_pct".
inline constexpr char kCpuMetricPrefix[] = "system/cpu.";
inline constexpr char kCpuCoreUtilSuffix[] = ".util_pct";
inline constexpr char kMemUsedPctMetric[] = "system/mem.used_pct";
inline constexpr char kSwapUsedMbMetric[] = "system/swap.used_mb";
// The monitored process tree (a launcher's command, its ranks and their
// workers), with the rank it measured (none: several ranks): CPU in % of one
// core, resident memory.
inline constexpr char kProcCpuMetric[] = "system/proc.cpu_pct";
inline constexpr char kProcRssMbMetric[] = "system/proc.rss_mb";
// The CPU's energy from RAPL (packages and DRAM, hardware/host/rapl.hpp), in
// joules since the sampler started (cumulative): the ledger's energy.
inline constexpr char kRaplEnergyMetric[] = "system/rapl.energy_j";
// The time the tree's threads waited on a run queue for a CPU (schedstat's
// run-queue delay), in % of one core (seconds waited per second, summed over
// the threads); the steps room's contention share (docs/steps.md) reads it.
inline constexpr char kProcCpuWaitMetric[] = "system/proc.cpu_wait_pct";
// The tree's threads' involuntary context switches (preempted), per second.
inline constexpr char kProcInvoluntarySwitchesMetric[] = "system/proc.involuntary_switches_per_s";
// The host's steal time (a VM's CPU taken by the hypervisor), in % of all cores.
inline constexpr char kCpuStealMetric[] = "system/cpu.steal_pct";
// A GPU's: "system/gpu.<index>.<quantity>".
inline constexpr char kGpuMetricPrefix[] = "system/gpu.";
inline constexpr char kGpuUtilQuantity[] = "util_pct";
inline constexpr char kGpuMemUsedQuantity[] = "mem_used_mb";
inline constexpr char kGpuMemTotalQuantity[] = "mem_total_mb";
// The monitored process tree's memory on that GPU.
inline constexpr char kGpuProcMemUsedQuantity[] = "proc.mem_used_mb";
// The other GPU readings: "system/gpu.<i>.<quantity>" (NVML's, then DCGM's profiling fields).
inline constexpr char kGpuFamily[] = "gpu";
inline constexpr char kGpuMemUtilQuantity[] = "mem_util_pct";
inline constexpr char kGpuPowerQuantity[] = "power_w";
inline constexpr char kGpuEnergyQuantity[] = "energy_j";  // cumulative since the driver loaded
inline constexpr char kGpuTempQuantity[] = "temp_c";
inline constexpr char kGpuSmClockQuantity[] = "sm_clock_mhz";
inline constexpr char kGpuMemClockQuantity[] = "mem_clock_mhz";
inline constexpr char kGpuPcieTxQuantity[] = "pcie_tx_mb_s";
inline constexpr char kGpuPcieRxQuantity[] = "pcie_rx_mb_s";
inline constexpr char kGpuThrottleQuantity[] = "throttle_reasons";
inline constexpr char kGpuProcUtilQuantity[] = "proc.util_pct";  // the tree's SM share
inline constexpr char kGpuSmActiveQuantity[] = "sm_active_pct";
inline constexpr char kGpuTensorActiveQuantity[] = "tensor_active_pct";
inline constexpr char kGpuDramActiveQuantity[] = "dram_active_pct";

}  // namespace trainscope::host

#endif  // TRAINSCOPE_HARDWARE_HOST_HOST_METRICS_HPP_
