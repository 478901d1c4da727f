// A LibTorch DataLoader (two worker threads) behind trainscope's timed loader:
// `for (auto& batch : trainscope::stalls::timed(tmr, *loader))` times each
// wait for a batch as IO and hands on exactly what the loader yields. Under
// `trainscope stalls --dataset ... -- libtorch_data_loader` it also reads the
// synthetic/loader modes and the W + N limit from the environment.
//
//   libtorch_data_loader [--epochs N]
#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "trainscope/run/run.hpp"
#include "trainscope/stalls/timed_loader.hpp"
#include "trainscope/trainscope.hpp"

int main(int argc, char** argv) {
  int epochs = 2;
  if (argc == 3 && std::string(argv[1]) == "--epochs") epochs = std::stoi(argv[2]);
  constexpr std::int64_t kSamples = 64, kBatch = 8;
  auto dataset = torch::data::datasets::TensorDataset(torch::randn({kSamples, 4}))
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = torch::data::make_data_loader(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(kBatch).workers(2));

  // Joins the run of `trainscope run`/`trainscope stalls` (TRAINSCOPE_RUN_DIR),
  // else creates one under trainscope-runs/.
  absl::StatusOr<std::unique_ptr<trainscope::Run>> run = trainscope::Run::Start();
  if (!run.ok()) {
    std::cerr << "libtorch_data_loader: " << run.status() << "\n";
    return 1;
  }
  trainscope::Timer tmr;
  (*run)->attach(tmr);
  auto linear = torch::nn::Linear(4, 1);
  std::int64_t samples = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto& batch : trainscope::stalls::timed(
             tmr, *loader, {run->get(), trainscope::TimeType::IO, static_cast<int>(kBatch)})) {
      tmr.start(trainscope::TimeType::BATCH);
      samples += batch.data.size(0);
      torch::NoGradGuard no_grad;
      (void)linear->forward(batch.data).sum();
      tmr.end(trainscope::TimeType::BATCH);
    }
  }
  std::cout << "samples " << samples << ", IO waits "
            << tmr.get_time_stats(trainscope::TimeType::IO).count << ", iterations "
            << tmr.get_time_stats("iteration").count << ", passes "
            << tmr.get_time_stats("loader_epoch").count << "\n";
  return (*run)->end().ok() ? 0 : 1;
}
