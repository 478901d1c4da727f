#include "common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

#include "absl/strings/escaping.h"
#include "fmt/format.h"

namespace trainscope::detail {
namespace {

// Closes `fd`; keeps the first error in *failed / *error.
void close_keeping_error(int fd, const char** failed, int* error) {
  if (::close(fd) != 0 && *failed == nullptr) {
    *failed = "close";
    *error = errno;
  }
}

// Creates `path` exclusively with `contents`, fsynced. On failure nothing is left.
absl::Status write_new_synced(const std::string& path, std::string_view contents, int mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return file_error(errno, "create", path);
  const char* failed = nullptr;
  int error = 0;
  if (write_all(fd, contents) != contents.size()) {
    failed = "write";
    error = errno;
  } else if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    // EINVAL/EROFS: a file system without fsync (some FUSE, tmpfs variants).
    failed = "sync";
    error = errno;
  }
  close_keeping_error(fd, &failed, &error);
  if (failed == nullptr) return absl::OkStatus();
  ::unlink(path.c_str());  // a truncated file is worse than none
  return file_error(error, failed, path);
}

// fsyncs the directory that holds `path`, so that a rename() or link() into it
// survives a power loss too. A directory that cannot be opened for reading (write
// permission only) or a file system without directory fsync is not an error.
absl::Status sync_directory_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::OkStatus();
  int error = 0;
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS && errno != EBADF && errno != ENOTSUP) {
    error = errno;
  }
  ::close(fd);
  if (error == 0) return absl::OkStatus();
  return file_error(error, "sync the directory of", path);
}

}  // namespace

absl::Status file_error(int error, std::string_view action, std::string_view path) {
  return absl::ErrnoToStatus(
      error, fmt::format("cannot {} \"{}\"", action,
                         absl::Utf8SafeCHexEscape(absl::string_view(path.data(), path.size()))));
}

std::string this_host() {
  char host[256] = {};
  return ::gethostname(host, sizeof(host) - 1) == 0 ? std::string(host) : std::string();
}

std::size_t write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_error(errno, "open", path);
  std::string out;
  absl::Status status = read_whole_fd(fd, path, &out);
  ::close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::Status read_whole_fd(int fd, std::string_view path, std::string* buffer) {
  buffer->resize(std::max<std::size_t>(buffer->capacity(), 4096));
  std::size_t used = 0;
  for (;;) {
    const ssize_t n =
        ::pread(fd, buffer->data() + used, buffer->size() - used, static_cast<off_t>(used));
    if (n < 0) {
      if (errno == EINTR) continue;
      return file_error(errno, "read", path);
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
    if (used == buffer->size()) buffer->resize(buffer->size() * 2);
  }
  buffer->resize(used);
  return absl::OkStatus();
}

absl::Status read_small_fd(int fd, std::string_view path, std::string* buffer) {
  buffer->resize(4096);
  ssize_t n;
  do {
    n = ::pread(fd, buffer->data(), buffer->size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return file_error(errno, "read", path);
  if (static_cast<std::size_t>(n) == buffer->size()) return read_whole_fd(fd, path, buffer);
  buffer->resize(static_cast<std::size_t>(n));
  return absl::OkStatus();
}

std::string temporary_path(const std::string& path, std::string_view prefix) {
  static std::atomic<std::uint64_t> counter{0};
  const std::uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  if (prefix.empty()) return fmt::format("{}.tmp-{}-{}", path, ::getpid(), n);
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return fmt::format("{}{}{}-{}-{}", dir, prefix, ::getpid(), n, name);
}

absl::Status write_new_file(std::string_view path, std::string_view contents) {
  const std::string target(path);
  absl::Status status = write_new_synced(target, contents, 0666);
  if (!status.ok()) return status;
  return sync_directory_of(target);
}

absl::Status write_file_atomically(const std::string& path, std::string_view contents,
                                   std::string_view tmp_prefix) {
  const std::string tmp = temporary_path(path, tmp_prefix);
  absl::Status status = write_new_synced(tmp, contents, 0644);
  if (!status.ok()) {
    // The caller knows the path it asked for, not the temporary name.
    return absl::Status(status.code(),
                        fmt::format("cannot replace \"{}\": {}", absl::Utf8SafeCHexEscape(path),
                                    std::string(status.message())));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return file_error(error, "replace", path);
  }
  return sync_directory_of(path);
}

absl::Status create_file_exclusively(const std::string& path, std::string_view contents,
                                     bool* created) {
  const std::string tmp = temporary_path(path);
  absl::Status status = write_new_synced(tmp, contents, 0644);
  if (!status.ok()) return status;
  const int result = ::link(tmp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(tmp.c_str());
  *created = result == 0;
  if (result == 0) return sync_directory_of(path);
  if (error == EEXIST) return absl::OkStatus();
  return file_error(error, "create", path);
}

absl::Status copy_file_atomically(const std::string& source, const std::string& target,
                                  std::string_view tmp_prefix) {
  const int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return file_error(errno, "open", source);
  struct stat st;
  if (::fstat(in, &st) != 0) {
    const int error = errno;
    ::close(in);
    return file_error(error, "read", source);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(in);
    return absl::InvalidArgumentError(
        fmt::format("cannot copy \"{}\": not a regular file", absl::Utf8SafeCHexEscape(source)));
  }
  const std::string tmp = temporary_path(target, tmp_prefix);
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    const int error = errno;
    ::close(in);
    return file_error(error, "create", tmp);
  }
  const char* failed = nullptr;
  int error = 0;
  std::string_view failed_path = tmp;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(in, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failed = "read";
      error = errno;
      failed_path = source;
      break;
    }
    if (n == 0) break;
    if (write_all(out, std::string_view(buffer, static_cast<std::size_t>(n))) !=
        static_cast<std::size_t>(n)) {
      failed = "write";
      error = errno;
      break;
    }
  }
  if (failed == nullptr && ::fsync(out) != 0 && errno != EINVAL && errno != EROFS) {
    failed = "sync";
    error = errno;
  }
  close_keeping_error(out, &failed, &error);
  ::close(in);
  if (failed == nullptr && ::rename(tmp.c_str(), target.c_str()) != 0) {
    failed = "rename into";
    error = errno;
    failed_path = target;
  }
  if (failed == nullptr) return sync_directory_of(target);
  ::unlink(tmp.c_str());
  return file_error(error, failed, failed_path);
}

}  // namespace trainscope::detail
