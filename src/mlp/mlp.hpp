// A multilayer perceptron trained with mini-batch SGD (momentum) on labelled images, every
// product of every step through one kernel of the GEMM registry:
//   forward   Z = A·W (nn), + bias, ReLU (softmax cross-entropy at the end)
//   backward  dW = Aᵀ·dZ (tn), db = column sums, dA = dZ·Wᵀ + 0 (nt), ReLU's mask
//   update    v = μ·v + g, w −= lr·v (PyTorch's SGD)
// Weights are rows × columns = inputs × outputs, row-major. The same seed gives the same
// initial weights (Kaiming-uniform from a counter hash) and the same batch order for every
// kernel and precision, so their loss curves agree to rounding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/idx.hpp"
#include "mlp/backend.hpp"

namespace km::mlp {

struct Options {
  std::vector<int> hidden = {512, 256};
  int batch = 128;
  int epochs = 10;
  double lr = 0.05;
  double momentum = 0.9;
  std::uint64_t seed = 0;
  BackendOptions backend;
};

// A labelled set, normalised: x (n × d, (pixel/255 − mean)/std with the training set's
// mean and std), y (n) in [0, classes).
template <class T>
struct Samples {
  std::size_t n = 0, d = 0;
  std::vector<T> x;
  std::vector<std::int32_t> y;
};

// The training set's pixel mean and standard deviation (of pixel/255), in double.
struct Normalisation {
  double mean = 0, std = 1;
};
Normalisation normalisation_of(const IdxImages& train);
// The first `limit` items (0: all) of a set, normalised.
template <class T>
Samples<T> make_samples(const IdxSet& set, Normalisation norm, std::size_t limit = 0);

struct EpochStats {
  int epoch = 0;
  PhaseTimes phases;  // training only
  double seconds = 0;      // wall time of the epoch's training (batches, steps, metrics out)
  double train_loss = 0;   // mean cross-entropy over the epoch's batches, as they were seen
  double train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double eval_seconds = 0; // the test pass (forward only), not in seconds
};

// The most epochs a run takes: each keeps its EpochStats (and with --dump-init its batch
// order), and the epoch counter is an int; far beyond any run that could finish.
constexpr int kMaxEpochs = 1000000;

// Throws UsageError for impossible options (sizes, rates, epochs), before any data is read.
void validate_options(const Options& o);
// validate_options, and the batch against the training items.
void validate(const Options& o, std::size_t train_n);

// Layer sizes: d, hidden..., classes.
std::vector<int> layer_sizes(const Options& o, std::size_t d, int classes);

// The initial weights of layer l (in × out) and the batch order of an epoch: the same for
// every kernel and precision (computed in double, rounded once to T).
std::vector<double> initial_weights(std::uint64_t seed, int layer, int in, int out);
std::vector<std::int32_t> epoch_order(std::uint64_t seed, int epoch, std::size_t n);

template <class T>
class Trainer {
 public:
  Trainer(const Options& o, std::size_t d, int classes);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One epoch over `train` in the seeded order, then the test set forward.
  EpochStats epoch(int e, const Samples<T>& train, const Samples<T>& test);
  // One step on these rows (forward, backward, update); the batch's mean loss.
  double step(const Samples<T>& set, const std::int32_t* rows, int count);
  // Forward only over `set`: mean loss and accuracy.
  Metrics evaluate(const Samples<T>& set);
  // Layer l's weights (in × out) and biases, copied to the host.
  std::vector<T> weights(int l);
  std::vector<T> biases(int l);
  void set_weights(int l, const std::vector<T>& w);
  const std::vector<int>& sizes() const { return sizes_; }
  std::string device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<int> sizes_;
};

// Trains for o.epochs, calling `observer` after each epoch.
template <class T>
std::vector<EpochStats> train(const Options& o, const Samples<T>& train, const Samples<T>& test, int classes,
                              const std::function<void(const EpochStats&)>& observer = {});

}  // namespace km::mlp
