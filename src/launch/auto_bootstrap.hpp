// The bootstrap of `trainscope run --auto` (internal): src/launch/auto_sitecustomize.py
// and auto_hooks.py (after bindings/python/trainscope/_import_hook.py, the one import
// hook), compiled in by cmake/TrainscopeEmbeddedTexts.cmake.
#ifndef TRAINSCOPE_SRC_LAUNCH_AUTO_BOOTSTRAP_HPP_
#define TRAINSCOPE_SRC_LAUNCH_AUTO_BOOTSTRAP_HPP_

#include <string>

#include "absl/status/statusor.h"

namespace trainscope::launcher::detail {

extern const char* const kAutoSitecustomize;
extern const char* const kAutoHooks;

// Writes kAutoSitecustomize as sitecustomize.py and kAutoHooks as
// _trainscope_auto_hooks.py into a new private directory under TMPDIR (else
// /tmp) and returns the directory.
absl::StatusOr<std::string> write_auto_bootstrap();

}  // namespace trainscope::launcher::detail

#endif  // TRAINSCOPE_SRC_LAUNCH_AUTO_BOOTSTRAP_HPP_
