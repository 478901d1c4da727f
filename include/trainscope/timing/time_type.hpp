// Region keys: Deep500's TimeType values plus user-defined names, interned once
// so that the start/end hot path works on a small integer id.
#ifndef TRAINSCOPE_TIMING_TIME_TYPE_HPP_
#define TRAINSCOPE_TIMING_TIME_TYPE_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope {

using KeyId = std::uint32_t;

// Deep500's enum, with its values (EPOCH=1 ... ALL=8).
enum class TimeType : KeyId {
  EPOCH = 1,
  BATCH = 2,
  FORWARD = 3,
  BACKWARD = 4,
  COMM = 5,
  IO = 6,
  OTHER = 7,
  ALL = 8,  // Only meaningful as "every key"; start/end reject it, as Deep500 does.
};

// A region key. Built-in keys convert implicitly from TimeType; named keys are
// interned in a process-wide registry the first time a name is seen, so the
// same name always yields the same id, in every timer and every thread.
// Interning takes a lock: in a hot loop, build the Key once and reuse it.
class Key {
 public:
  constexpr Key(TimeType type) noexcept  // NOLINT(google-explicit-constructor)
      : id_(static_cast<KeyId>(type)) {}
  // Names of built-in types ("EPOCH", ...) map to those types.
  Key(std::string_view name);                             // NOLINT(google-explicit-constructor)
  Key(const char* name) : Key(std::string_view(name)) {}  // NOLINT
  Key(const std::string& name) : Key(std::string_view(name)) {}  // NOLINT

  // The key with this id; the id must come from Key::id() in this process.
  static Key FromId(KeyId id) noexcept { return Key(id, 0); }

  constexpr KeyId id() const noexcept { return id_; }
  // "EPOCH" for built-ins, the interned name otherwise.
  std::string_view name() const;
  constexpr bool is_all() const noexcept { return id_ == static_cast<KeyId>(TimeType::ALL); }
  constexpr bool is_builtin() const noexcept {
    return id_ >= 1 && id_ <= static_cast<KeyId>(TimeType::ALL);
  }

  friend constexpr bool operator==(Key a, Key b) noexcept { return a.id_ == b.id_; }
  friend constexpr bool operator!=(Key a, Key b) noexcept { return a.id_ != b.id_; }

 private:
  constexpr Key(KeyId id, int /*tag*/) noexcept : id_(id) {}
  KeyId id_;
};

// Number of ids handed out so far (built-ins included); ids are dense in
// [1, key_count()].
KeyId key_count() noexcept;

// The name of a TimeType ("EPOCH").
std::string_view time_type_name(TimeType type) noexcept;

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_TIME_TYPE_HPP_
