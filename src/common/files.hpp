// File I/O used by every room (internal): one way to report errors, read a
// whole file, and write files that readers never see half-written.
#ifndef TRAINSCOPE_SRC_COMMON_FILES_HPP_
#define TRAINSCOPE_SRC_COMMON_FILES_HPP_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope::detail {

// "cannot <action> \"<path>\"" with the errno mapped to a status code
// (ENOENT: NotFound, EACCES: PermissionDenied, ENOSPC: ResourceExhausted, ...)
// and its text appended. Non-printable bytes of the path are escaped.
absl::Status file_error(int error, std::string_view action, std::string_view path);

// This machine's host name ("" if it has none).
std::string this_host();

// Writes all of `data` unless an error stops it (short writes and EINTR are
// resumed); returns the bytes written and leaves errno set when fewer.
std::size_t write_all(int fd, std::string_view data);

// The whole file.
absl::StatusOr<std::string> read_whole_file(const std::string& path);
// Reads the whole file into `buffer` from offset 0 with pread, reusing the
// buffer's capacity (for /proc and /sys files read again every sample).
absl::Status read_whole_fd(int fd, std::string_view path, std::string* buffer);
// The same for a file generated whole on every read and far below a page (a
// /proc/<pid>/stat or io file, read for each member of a process tree every
// sample): one pread is the whole file unless it fills the buffer.
absl::Status read_small_fd(int fd, std::string_view path, std::string* buffer);

// A temporary name next to `path` that no other writer uses at the same time:
// "<path>.tmp-<pid>-<n>", or with `prefix` "<dir>/<prefix><pid>-<n>-<name>"
// (for directories whose readers skip names starting with the prefix).
std::string temporary_path(const std::string& path, std::string_view prefix = {});

// Creates `path` (it must not exist: O_EXCL, as Deep500's mode 'x') with
// `contents`, fsyncs it, and removes it again if anything failed, so a
// truncated file is never left behind.
absl::Status write_new_file(std::string_view path, std::string_view contents);
// Readers see the old or the new contents, never a mix, also after a crash
// or a power loss: a temporary file in the same directory, fsync, rename(),
// then fsync of the directory. A crash before the rename leaves the old file
// as it was (and the temporary file behind, which readers skip by its name).
absl::Status write_file_atomically(const std::string& path, std::string_view contents,
                                   std::string_view tmp_prefix = {});
// Creates `path` with its full contents, or leaves an existing file alone
// (*created false): a temporary file, then link(), which fails if `path`
// exists, so concurrent processes agree on one winner.
absl::Status create_file_exclusively(const std::string& path, std::string_view contents,
                                     bool* created);
// Copies `source` to `target` through a temporary file in the target's
// directory named with `tmp_prefix` (readers skip such names), then renames
// it into place: no reader ever lists a partial copy.
absl::Status copy_file_atomically(const std::string& source, const std::string& target,
                                  std::string_view tmp_prefix);

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_FILES_HPP_
