// The packages of the interpreter a command runs (`python -m pip freeze`),
// cached per environment: pip takes ~0.4 s of CPU, and a sweep runs the same
// environment many times. The cache key is the interpreter (its path and what
// it resolves to), PYTHONPATH/PYTHONUSERBASE and the modification times of its
// package directories (lib/python*/site-packages, dist-packages of its prefix,
// /usr/local for /usr, the user site): installing or removing a package
// changes a directory's time, so a stale list is never reused.
#ifndef TRAINSCOPE_SRC_LAUNCH_PIP_FREEZE_HPP_
#define TRAINSCOPE_SRC_LAUNCH_PIP_FREEZE_HPP_

#include <chrono>
#include <optional>
#include <string>

namespace trainscope::launcher::detail {

struct PipFreeze {
  std::string text;     // pip freeze's output
  bool cached = false;  // read from the cache, pip not run
};

// What identifies `python`'s installed packages (the cache key's text).
std::string environment_signature(const std::string& python);
// The cache directory: $TRAINSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/trainscope,
// else ~/.cache/trainscope; "" when none can be named.
std::string cache_dir();
// `python -m pip freeze`, from the cache when its environment is unchanged;
// nothing when pip is missing, fails or runs past `timeout`. A cache that
// cannot be written is no error (the list is still returned).
std::optional<PipFreeze> pip_freeze(const std::string& python, std::chrono::seconds timeout);

}  // namespace trainscope::launcher::detail

#endif  // TRAINSCOPE_SRC_LAUNCH_PIP_FREEZE_HPP_
