#include "trainscope/timing/time_type.hpp"

#include <atomic>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "trainscope/timing/detail/open_regions.hpp"

namespace trainscope {
namespace {

constexpr std::string_view kBuiltinNames[] = {"",     "EPOCH", "BATCH", "FORWARD", "BACKWARD",
                                              "COMM", "IO",    "OTHER", "ALL"};
constexpr KeyId kBuiltinCount = static_cast<KeyId>(TimeType::ALL);

// Process-wide: the same name must give the same id in every timer, so that
// per-thread timers can be merged and exporters can name ids.
class KeyRegistry {
 public:
  KeyRegistry() {
    for (KeyId id = 1; id <= kBuiltinCount; ++id) {
      names_.emplace_back(kBuiltinNames[id]);
      ids_.emplace(names_.back(), id);
      timing::detail::publish_key_name(id, names_.back().c_str());
    }
    count_.store(kBuiltinCount, std::memory_order_release);
  }

  KeyId intern(std::string_view name) {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      auto it = ids_.find(name);
      if (it != ids_.end()) return it->second;
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    names_.emplace_back(name);  // deque: earlier string_views stay valid
    const KeyId id = static_cast<KeyId>(names_.size());
    ids_.emplace(names_.back(), id);
    timing::detail::publish_key_name(id, names_.back().c_str());
    count_.store(id, std::memory_order_release);
    return id;
  }

  std::string_view name(KeyId id) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (id == 0 || id > names_.size()) return "<invalid key>";
    return names_[id - 1];
  }

  KeyId count() const noexcept { return count_.load(std::memory_order_acquire); }

 private:
  // std::shared_mutex rather than absl::Mutex: distribution builds of Abseil
  // are not TSan-instrumented, and the threading tests must run under TSan.
  std::shared_mutex mu_;
  std::deque<std::string> names_;                     // guarded by mu_
  absl::flat_hash_map<std::string_view, KeyId> ids_;  // guarded by mu_
  std::atomic<KeyId> count_{0};
};

KeyRegistry& registry() {
  // Leaked on purpose: timers in static objects may name keys during exit.
  static KeyRegistry* const instance = new KeyRegistry();
  return *instance;
}

}  // namespace

Key::Key(std::string_view name) : id_(registry().intern(name)) {}

std::string_view Key::name() const { return registry().name(id_); }

KeyId key_count() noexcept { return registry().count(); }

std::string_view time_type_name(TimeType type) noexcept {
  const auto id = static_cast<KeyId>(type);
  return id >= 1 && id <= kBuiltinCount ? kBuiltinNames[id] : std::string_view("<invalid>");
}

}  // namespace trainscope
