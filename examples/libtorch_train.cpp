// A LibTorch training loop timed with trainscope, the C++ counterpart of
// Deep500's PyTorch example: a small MLP learns a synthetic classification
// task with SGD, and EPOCH, BATCH, IO, FORWARD and BACKWARD are timed with a
// CPUGPUTimer.
//
//   libtorch_train [--epochs N]
//
// On a GPU the model and data live on CUDA and gpu=true regions are timed by
// CUDA events on Torch's current stream, next to the CPU time (which, since
// kernels run asynchronously, is mostly launch time). On a CPU-only machine
// or with a CPU build of Torch the same code times on the CPU alone.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string_view>
#include <system_error>

#include <torch/torch.h>

#ifdef TRAINSCOPE_EXAMPLE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "trainscope/trainscope.hpp"

namespace {

using trainscope::TimeType;

constexpr std::int64_t kSamples = 4096;
constexpr std::int64_t kFeatures = 32;
constexpr std::int64_t kClasses = 4;
constexpr std::int64_t kBatchSize = 128;

struct Net : torch::nn::Module {
  Net()
      : fc1(register_module("fc1", torch::nn::Linear(kFeatures, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 128))),
        fc3(register_module("fc3", torch::nn::Linear(128, kClasses))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x));
    x = torch::relu(fc2->forward(x));
    return fc3->forward(x);
  }

  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Linear fc3;
};

// The stream GPU events must be recorded on: Torch's current stream, so that
// an event recorded after a kernel launch completes after that kernel.
trainscope::StreamHandle TorchStream(const torch::Device& device) {
#ifdef TRAINSCOPE_EXAMPLE_TORCH_CUDA
  if (device.is_cuda()) return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#endif
  (void)device;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    const std::string_view text = value;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), epochs);
    if (arg != "--epochs" || error != std::errc() || end != text.data() + text.size() ||
        epochs <= 0) {
      std::cerr << "usage: libtorch_train [--epochs N]\n";
      return 2;
    }
    ++i;
  }

  torch::manual_seed(0);
  const torch::Device device =
      torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  std::cout << "training on " << device << "\n";

  // The data set stays in host memory, as a loader's would: moving each batch
  // to the device is part of the IO region.
  // Classes are noisy clouds around random centres that overlap, so the loss
  // falls over the epochs without reaching zero.
  const torch::Tensor centres = torch::randn({kClasses, kFeatures}) * 0.3;
  const torch::Tensor labels = torch::randint(kClasses, {kSamples}, torch::kLong);
  const torch::Tensor inputs =
      centres.index_select(0, labels) + torch::randn({kSamples, kFeatures});

  auto net = std::make_shared<Net>();
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  trainscope::CPUGPUTimer timer;
  timer.set_stream(TorchStream(device));
  std::cout << "GPU timing: " << timer.gpu_description() << "\n";

  const std::int64_t batches = (kSamples + kBatchSize - 1) / kBatchSize;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    timer.start(TimeType::EPOCH);
    net->train();
    const torch::Tensor order = torch::randperm(kSamples, torch::kLong);
    // Summed on the device: reading a loss every batch (item()) would make
    // the CPU wait for the GPU and hide the asynchrony being measured.
    torch::Tensor loss_sum = torch::zeros({}, device);
    for (std::int64_t b = 0; b < batches; ++b) {
      timer.start(TimeType::BATCH, /*gpu=*/true);

      timer.start(TimeType::IO);
      const torch::Tensor index = order.slice(0, b * kBatchSize, (b + 1) * kBatchSize);
      const torch::Tensor x = inputs.index_select(0, index).to(device, /*non_blocking=*/true);
      const torch::Tensor y = labels.index_select(0, index).to(device, /*non_blocking=*/true);
      timer.end(TimeType::IO);

      timer.start(TimeType::FORWARD, /*gpu=*/true);
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      timer.end(TimeType::FORWARD, /*gpu=*/true);

      timer.start(TimeType::BACKWARD, /*gpu=*/true);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      timer.end(TimeType::BACKWARD, /*gpu=*/true);

      timer.end(TimeType::BATCH, /*gpu=*/true);
      // Unlike Deep500, no periodic complete_all() is needed: end() never
      // waits, finished GPU events are collected as the loop goes, and the
      // event pool grows on demand.
      loss_sum += loss.detach();
    }
    timer.end(TimeType::EPOCH);
    std::cout << "epoch " << epoch + 1 << "/" << epochs << ": mean loss "
              << loss_sum.item<double>() / static_cast<double>(batches) << "\n";
  }

  // Reading statistics waits for outstanding GPU regions first.
  std::cout << "\nDeep500 format (print_all_time_stats):\n";
  timer.print_all_time_stats(std::cout, trainscope::StatsFormat::kDeep500);
  std::cout << "\nTable format:\n";
  timer.print_all_time_stats(std::cout, trainscope::StatsFormat::kTable);
  return 0;
}
