// A C++ training loop with a timed loader, for `trainscope stalls`:
//
//   trainscope stalls --dataset DIR --iterations 50 -- stalls_loop --data DIR
//
// The loader reads the dataset's files in batches and "decodes" each sample
// with a CPU spin (or a sleep) of --decode-ms; the step sleeps --step-ms (as a GPU step
// leaves the CPU free). `trainscope::stalls::timed` times each wait for a
// batch as IO and, under `trainscope stalls`, hands out the first batch again
// and again (the synthetic run) and ends the run and the process after
// W + N batches, as Python's `tmr.timed(loader)` does.
//
//   stalls_loop --data DIR [--batch 8] [--decode-ms 2] [--step-ms 10] [--epochs 3]
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "trainscope/run/run.hpp"
#include "trainscope/stalls/timed_loader.hpp"
#include "trainscope/trainscope.hpp"

namespace {

namespace fs = std::filesystem;

struct Options {
  fs::path data;
  int batch = 8;
  double decode_ms = 2;
  double step_ms = 10;
  int epochs = 3;
  bool decode_sleeps = false;  // --decode sleep: waiting (remote decode, I/O), not CPU
};

constexpr char kUsage[] =
    "usage: stalls_loop --data DIR [--batch N] [--decode-ms MS] [--decode spin|sleep]\n"
    "                   [--step-ms MS] [--epochs N]\n";

template <class T>
bool parse_number(std::string_view text, T* out) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return false;
  *out = value;
  return true;
}

bool parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << arg << " needs a value\n" << kUsage;
      return false;
    }
    const std::string_view value = argv[++i];
    bool ok = true;
    if (arg == "--data") {
      o->data = std::string(value);
    } else if (arg == "--batch") {
      ok = parse_number(value, &o->batch) && o->batch > 0;
    } else if (arg == "--decode-ms") {
      ok = parse_number(value, &o->decode_ms);
    } else if (arg == "--step-ms") {
      ok = parse_number(value, &o->step_ms);
    } else if (arg == "--decode") {
      ok = value == "spin" || value == "sleep";
      o->decode_sleeps = value == "sleep";
    } else if (arg == "--epochs") {
      ok = parse_number(value, &o->epochs);
    } else {
      std::cerr << "unknown option " << arg << "\n" << kUsage;
      return false;
    }
    if (!ok) {
      std::cerr << arg << ": not a valid value: '" << value << "'\n" << kUsage;
      return false;
    }
  }
  if (o->data.empty()) {
    std::cerr << "--data DIR is required\n" << kUsage;
    return false;
  }
  return true;
}

void spin_for(double ms) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// A batch: the bytes of B samples, "decoded" into one checksum each.
struct Batch {
  std::vector<std::uint64_t> samples;
};

// The loader: a range of batches over the dataset's files, read and decoded
// in the loop's thread (as a DataLoader with num_workers=0).
class FileLoader {
 public:
  FileLoader(std::vector<fs::path> files, int batch, double decode_ms, bool decode_sleeps)
      : files_(std::move(files)),
        batch_(batch),
        decode_ms_(decode_ms),
        decode_sleeps_(decode_sleeps) {}

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    const Batch& operator*() const { return batch_; }
    iterator& operator++() {
      load();
      return *this;
    }
    bool operator==(const iterator& other) const { return done_ == other.done_; }
    bool operator!=(const iterator& other) const { return !(*this == other); }

   private:
    friend class FileLoader;
    iterator(const FileLoader* loader, bool done) : loader_(loader), done_(done) {
      if (!done_) load();
    }
    void load() {
      const std::size_t n = loader_->files_.size();
      const std::size_t batch = static_cast<std::size_t>(loader_->batch_);
      if (next_ + batch > n) {
        done_ = true;  // drop_last, as most training loops
        return;
      }
      batch_.samples.clear();
      std::vector<char> bytes;
      for (std::size_t i = 0; i < batch; ++i) {
        std::ifstream in(loader_->files_[next_ + i], std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        std::uint64_t sum = 1469598103934665603ull;
        for (char c : bytes) sum = (sum ^ static_cast<unsigned char>(c)) * 1099511628211ull;
        if (loader_->decode_sleeps_) {
          std::this_thread::sleep_for(
              std::chrono::duration<double, std::milli>(loader_->decode_ms_));
        } else {
          spin_for(loader_->decode_ms_);
        }
        batch_.samples.push_back(sum);
      }
      next_ += batch;
    }
    const FileLoader* loader_;
    bool done_;
    std::size_t next_ = 0;
    Batch batch_;
  };

  iterator begin() const { return iterator(this, false); }
  iterator end() const { return iterator(this, true); }
  std::size_t size() const { return files_.size() / static_cast<std::size_t>(batch_); }

 private:
  std::vector<fs::path> files_;
  int batch_;
  double decode_ms_;
  bool decode_sleeps_;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, &options)) return 2;
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(options.data, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (error || files.empty()) {
    std::cerr << "stalls_loop: " << options.data.string() << ": "
              << (error ? error.message() : "holds no file") << "\n";
    return 2;
  }
  std::sort(files.begin(), files.end());

  // Under `trainscope run` or `trainscope stalls` this joins the launcher's
  // run (TRAINSCOPE_RUN_DIR); alone it creates one under trainscope-runs/.
  absl::StatusOr<std::unique_ptr<trainscope::Run>> run = trainscope::Run::Start();
  if (!run.ok()) {
    std::cerr << "stalls_loop: " << run.status() << "\n";
    return 1;
  }
  trainscope::Timer tmr;
  (*run)->attach(tmr);

  FileLoader loader(files, options.batch, options.decode_ms, options.decode_sleeps);
  trainscope::stalls::TimedOptions timed;
  timed.run = run->get();
  timed.batch_size = options.batch;
  std::uint64_t checksum = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    tmr.start(trainscope::TimeType::EPOCH);
    for (const Batch& batch : trainscope::stalls::timed(tmr, loader, timed)) {
      tmr.start(trainscope::TimeType::BATCH);
      for (std::uint64_t s : batch.samples) checksum ^= s;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options.step_ms));
      tmr.end(trainscope::TimeType::BATCH);
    }
    tmr.end(trainscope::TimeType::EPOCH);
  }
  std::cout << "stalls_loop: " << options.epochs << " epochs, checksum " << checksum << "\n";
  return (*run)->end().ok() ? 0 : 1;
}
