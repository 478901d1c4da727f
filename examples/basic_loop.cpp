// trainscope's main demo: a plain C++ training loop, instrumented the way
// Deep500's PyTorch example is (EPOCH, BATCH, IO, FORWARD, BACKWARD), plus a
// region of our own ("data_aug"). No GPU, framework or server is needed.
//
//   basic_loop [OUT_DIR] [--epochs N] [--batches N]
//
// Trains a two-layer perceptron with SGD on synthetic data, then prints the
// statistics as Deep500 prints them and as a readable table. While it runs,
// an ExportPipeline streams every region to OUT_DIR/samples.csv from a
// background thread; at the end the summary goes to OUT_DIR/summary.json.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "trainscope/trainscope.hpp"

namespace {

using trainscope::TimeType;

struct Options {
  std::filesystem::path out_dir = "trainscope-demo";
  int epochs = 3;
  int batches = 40;
  bool help = false;
};

constexpr char kUsage[] = "usage: basic_loop [OUT_DIR] [--epochs N] [--batches N]\n";

bool ParsePositive(std::string_view text, int* out) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return false;
  *out = value;
  return true;
}

bool ParseOptions(int argc, char** argv, Options* options) {
  bool have_dir = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options->help = true;
    } else if (arg == "--epochs" || arg == "--batches") {
      int* target = arg == "--epochs" ? &options->epochs : &options->batches;
      if (i + 1 >= argc || !ParsePositive(argv[i + 1], target)) {
        std::cerr << arg << " needs a positive integer\n" << kUsage;
        return false;
      }
      ++i;
    } else if (!arg.empty() && arg[0] != '-' && !have_dir) {
      options->out_dir = std::string(arg);
      have_dir = true;
    } else {
      std::cerr << kUsage;
      return false;
    }
  }
  return true;
}

// Row-major matrix, just enough for a forward and a backward pass.
struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<float> data;

  Matrix() = default;
  Matrix(int r, int c) : rows(r), cols(c), data(static_cast<std::size_t>(r) * c, 0.0f) {}
  float& at(int r, int c) { return data[static_cast<std::size_t>(r) * cols + c]; }
  float at(int r, int c) const { return data[static_cast<std::size_t>(r) * cols + c]; }
};

// out = a * b, or a^T * b / a * b^T: the three products backpropagation needs.
enum class Transpose { kNone, kA, kB };
Matrix MatMul(const Matrix& a, const Matrix& b, Transpose t = Transpose::kNone) {
  const int n = t == Transpose::kA ? a.cols : a.rows;
  const int k = t == Transpose::kA ? a.rows : a.cols;
  const int m = t == Transpose::kB ? b.rows : b.cols;
  Matrix out(n, m);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < k; ++p) {
      const float x = t == Transpose::kA ? a.at(p, i) : a.at(i, p);
      if (t == Transpose::kB) {
        for (int j = 0; j < m; ++j) out.at(i, j) += x * b.at(j, p);
      } else {
        // i-p-j order walks b and out row by row, which keeps this cache-friendly.
        for (int j = 0; j < m; ++j) out.at(i, j) += x * b.at(p, j);
      }
    }
  }
  return out;
}

constexpr int kFeatures = 256;
constexpr int kHidden = 256;
constexpr int kClasses = 10;

struct Batch {
  Matrix inputs;
  std::vector<int> labels;
};

// Stands in for a data loader: each class is a noisy pattern around its own
// centre, so the model has something to learn. Batch sizes vary like a
// loader with uneven shards, so batch times are not all alike.
class SyntheticLoader {
 public:
  explicit SyntheticLoader(std::uint32_t seed) : rng_(seed), centres_(kClasses, kFeatures) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : centres_.data) v = normal(rng_);
  }

  Batch Next() {
    std::uniform_int_distribution<int> size_dist(32, 96);
    std::uniform_int_distribution<int> class_dist(0, kClasses - 1);
    std::normal_distribution<float> noise(0.0f, 3.0f);
    Batch batch{Matrix(size_dist(rng_), kFeatures), {}};
    for (int r = 0; r < batch.inputs.rows; ++r) {
      const int label = class_dist(rng_);
      batch.labels.push_back(label);
      for (int c = 0; c < kFeatures; ++c)
        batch.inputs.at(r, c) = centres_.at(label, c) + noise(rng_);
    }
    return batch;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
  Matrix centres_;
};

// Random feature dropout and scaling: cheap, but real per-element work.
void Augment(Batch* batch, std::mt19937* rng) {
  std::bernoulli_distribution drop(0.1);
  std::uniform_real_distribution<float> scale(0.9f, 1.1f);
  for (int r = 0; r < batch->inputs.rows; ++r) {
    const float s = scale(*rng);
    for (int c = 0; c < kFeatures; ++c) {
      float& v = batch->inputs.at(r, c);
      v = drop(*rng) ? 0.0f : v * s;
    }
  }
}

// Two-layer perceptron: logits = relu(x W1) W2, softmax cross-entropy.
class Mlp {
 public:
  explicit Mlp(std::mt19937* rng) : w1_(kFeatures, kHidden), w2_(kHidden, kClasses) {
    std::normal_distribution<float> init1(0.0f, std::sqrt(2.0f / kFeatures));
    std::normal_distribution<float> init2(0.0f, std::sqrt(2.0f / kHidden));
    for (float& v : w1_.data) v = init1(*rng);
    for (float& v : w2_.data) v = init2(*rng);
  }

  // Returns the mean loss; keeps the activations Backward() needs.
  float Forward(const Batch& batch) {
    hidden_ = MatMul(batch.inputs, w1_);
    for (float& v : hidden_.data) v = std::max(v, 0.0f);
    probs_ = MatMul(hidden_, w2_);
    float loss = 0.0f;
    for (int r = 0; r < probs_.rows; ++r) {
      float top = probs_.at(r, 0);
      for (int c = 1; c < kClasses; ++c) top = std::max(top, probs_.at(r, c));
      float sum = 0.0f;
      for (int c = 0; c < kClasses; ++c) sum += probs_.at(r, c) = std::exp(probs_.at(r, c) - top);
      for (int c = 0; c < kClasses; ++c) probs_.at(r, c) /= sum;
      loss -= std::log(std::max(probs_.at(r, batch.labels[r]), 1e-12f));
    }
    return loss / static_cast<float>(probs_.rows);
  }

  // Gradients of the mean loss on the batch last passed to Forward(), then
  // one SGD step.
  void Backward(const Batch& batch, float learning_rate) {
    Matrix grad_logits = probs_;
    const float inv_n = 1.0f / static_cast<float>(grad_logits.rows);
    for (int r = 0; r < grad_logits.rows; ++r) {
      grad_logits.at(r, batch.labels[r]) -= 1.0f;
      for (int c = 0; c < kClasses; ++c) grad_logits.at(r, c) *= inv_n;
    }
    const Matrix grad_w2 = MatMul(hidden_, grad_logits, Transpose::kA);
    Matrix grad_hidden = MatMul(grad_logits, w2_, Transpose::kB);
    for (std::size_t i = 0; i < grad_hidden.data.size(); ++i) {
      if (hidden_.data[i] <= 0.0f) grad_hidden.data[i] = 0.0f;
    }
    const Matrix grad_w1 = MatMul(batch.inputs, grad_hidden, Transpose::kA);
    for (std::size_t i = 0; i < w1_.data.size(); ++i)
      w1_.data[i] -= learning_rate * grad_w1.data[i];
    for (std::size_t i = 0; i < w2_.data.size(); ++i)
      w2_.data[i] -= learning_rate * grad_w2.data[i];
  }

 private:
  Matrix w1_;
  Matrix w2_;
  Matrix hidden_;
  Matrix probs_;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  if (options.help) {
    std::cout << kUsage;
    return 0;
  }

  const std::filesystem::path out_dir =
      std::filesystem::absolute(options.out_dir).lexically_normal();
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    std::cerr << "cannot create " << out_dir << ": " << error.message() << "\n";
    return 1;
  }
  const std::filesystem::path summary_path = out_dir / "summary.json";
  const std::filesystem::path samples_path = out_dir / "samples.csv";
  // FileExporter appends to an existing samples file so that a resumed run
  // can continue it; this demo starts fresh so the CSV matches the summary.
  std::filesystem::remove(samples_path, error);

  // The pipeline is declared before the timer so that it outlives it: the
  // timer hands its last samples over when it is destroyed.
  trainscope::ExportPipeline pipeline;
  auto exporter = trainscope::FileExporter::Create(summary_path.string(), samples_path.string());
  if (!exporter.ok()) {
    std::cerr << exporter.status().message() << "\n";
    return 1;
  }
  pipeline.add_exporter(*std::move(exporter));

  // A CPUGPUTimer, as a GPU training script would use. Without a GPU the
  // gpu=true regions below are timed on the CPU, after one warning on stderr,
  // so the same code runs on a laptop and on a cluster node.
  trainscope::CPUGPUTimer timer;
  timer.attach(pipeline);
  // Named keys are interned under a lock: build them once, outside the loop.
  const trainscope::Key kDataAug("data_aug");

  SyntheticLoader loader(/*seed=*/42);
  Mlp model(&loader.rng());
  constexpr float kLearningRate = 0.05f;

  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    timer.start(TimeType::EPOCH);
    float loss_sum = 0.0f;
    for (int b = 0; b < options.batches; ++b) {
      // BATCH opens before IO so that a slow loader shows up in batch time,
      // as in Deep500's example (which has to start the next BATCH at the end
      // of the loop body because its loader is the for statement).
      timer.start(TimeType::BATCH, /*gpu=*/true);

      timer.start(TimeType::IO);
      Batch batch = loader.Next();
      timer.end(TimeType::IO);

      {
        // scope() ends the region when the block is left, even by an exception.
        auto region = timer.scope(kDataAug);
        Augment(&batch, &loader.rng());
      }

      timer.start(TimeType::FORWARD, /*gpu=*/true);
      loss_sum += model.Forward(batch);
      timer.end(TimeType::FORWARD, /*gpu=*/true);

      timer.start(TimeType::BACKWARD, /*gpu=*/true);
      model.Backward(batch, kLearningRate);
      timer.end(TimeType::BACKWARD, /*gpu=*/true);

      timer.end(TimeType::BATCH, /*gpu=*/true);
    }
    timer.end(TimeType::EPOCH);
    std::cout << "epoch " << epoch + 1 << "/" << options.epochs << ": mean loss "
              << loss_sum / static_cast<float>(options.batches) << "\n";
  }

  // export_summary() queues the summary for the background thread; flush()
  // waits until summary.json and every sample in samples.csv are on disk.
  timer.export_summary(pipeline);
  pipeline.flush();
  if (pipeline.export_errors() != 0) {
    std::cerr << "exporting failed; the warnings above say why\n";
    return 1;
  }

  std::cout << "\nDeep500 format (print_all_time_stats):\n";
  timer.print_all_time_stats(std::cout, trainscope::StatsFormat::kDeep500);
  std::cout << "\nTable format:\n";
  timer.print_all_time_stats(std::cout, trainscope::StatsFormat::kTable);
  std::cout << "\nSummary: " << summary_path.string() << "\n"
            << "Samples: " << samples_path.string() << " (one line per region)\n";
  return 0;
}
