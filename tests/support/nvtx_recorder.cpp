// An NVTX tool library, loaded by the NVTX runtime through
// NVTX_INJECTION64_PATH exactly as Nsight Systems' is: it records every range
// in a text log that nvtx_test reads back with dlsym.
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex mu;
std::deque<std::string> domains;  // deque: handles point into it
std::deque<std::string> strings;
std::vector<std::string> events;
std::uint64_t next_range = 1;

const char* domain_name(nvtxDomainHandle_t domain) {
  return domain == nullptr ? "(default)" : reinterpret_cast<const std::string*>(domain)->c_str();
}

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  std::lock_guard<std::mutex> lock(mu);
  domains.emplace_back(name);
  return reinterpret_cast<nvtxDomainHandle_t>(&domains.back());
}

nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* text) {
  std::lock_guard<std::mutex> lock(mu);
  strings.emplace_back(text);
  return reinterpret_cast<nvtxStringHandle_t>(&strings.back());
}

nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* attributes) {
  std::string name = "(unnamed)";
  if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    name = *reinterpret_cast<const std::string*>(attributes->message.registered);
  } else if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    name = attributes->message.ascii;
  }
  std::lock_guard<std::mutex> lock(mu);
  const std::uint64_t id = next_range++;
  events.push_back("start " + std::string(domain_name(domain)) + " " + name + " " +
                   std::to_string(id));
  return id;
}

void NVTX_API DomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  std::lock_guard<std::mutex> lock(mu);
  events.push_back("end " + std::string(domain_name(domain)) + " " + std::to_string(id));
}

template <typename F>
void install(NvtxFunctionTable table, unsigned int size, int id, F* function) {
  if (static_cast<unsigned int>(id) < size)
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
    return 0;
  }
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
  install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
  install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
  install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
  return 1;
}

// For the test: a copy of the log, one event per line.
__attribute__((visibility("default"))) std::vector<std::string> nvtx_recorder_events() {
  std::lock_guard<std::mutex> lock(mu);
  return events;
}

__attribute__((visibility("default"))) void nvtx_recorder_clear() {
  std::lock_guard<std::mutex> lock(mu);
  events.clear();
}

}  // extern "C"
