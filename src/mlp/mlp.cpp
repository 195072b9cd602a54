#include "mlp/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "cuda/device.hpp"
#include "io/generate.hpp"
#include "timing/timer.hpp"

namespace km::mlp {

void validate_options(const Options& o) {
  if (o.hidden.empty()) throw UsageError("--hidden: need at least one hidden layer");
  for (int h : o.hidden)
    if (h < 1 || h > (1 << 16)) throw UsageError(strprintf("--hidden: layer size %d is not in 1..65536", h));
  if (o.batch < 1 || o.batch > (1 << 16)) throw UsageError(strprintf("--batch=%d: must be in 1..65536", o.batch));
  if (o.epochs < 1 || o.epochs > kMaxEpochs)
    throw UsageError(strprintf("--epochs=%d: must be in 1..%d", o.epochs, kMaxEpochs));
  if (!(o.lr > 0 && std::isfinite(o.lr))) throw UsageError(strprintf("--lr=%g: must be positive and finite", o.lr));
  if (!(o.momentum >= 0 && o.momentum < 1))
    throw UsageError(strprintf("--momentum=%g: must be in [0, 1)", o.momentum));
  if (o.backend.threads < 0) throw UsageError(strprintf("--threads=%d: must be positive", o.backend.threads));
}

void validate(const Options& o, std::size_t train_n) {
  validate_options(o);
  if (static_cast<std::size_t>(o.batch) > train_n)
    throw UsageError(strprintf("--batch=%d: larger than the %zu training items", o.batch, train_n));
}

std::vector<int> layer_sizes(const Options& o, std::size_t d, int classes) {
  std::vector<int> s{static_cast<int>(d)};
  s.insert(s.end(), o.hidden.begin(), o.hidden.end());
  s.push_back(classes);
  return s;
}

std::vector<double> initial_weights(std::uint64_t seed, int layer, int in, int out) {
  // Kaiming-uniform for ReLU: U(−b, b) with b = sqrt(6 / fan_in).
  const double bound = std::sqrt(6.0 / in);
  std::vector<double> w(std::size_t(in) * out);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = bound * (2 * unit_double(hash64(seed, 0x6d6c7000ull + layer, i)) - 1);
  return w;
}

std::vector<std::int32_t> epoch_order(std::uint64_t seed, int epoch, std::size_t n) {
  std::vector<std::int32_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::int32_t>(i);
  for (std::size_t i = n; i-- > 1;) {  // Fisher–Yates from a counter hash
    const std::size_t j = hash64(seed, 0x6d6c7100ull + std::uint64_t(epoch), i) % (i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

Normalisation normalisation_of(const IdxImages& train) {
  double sum = 0, sq = 0;
  for (std::uint8_t p : train.pixels) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(train.pixels.size()), mean = sum / n;
  const double var = std::max(sq / n - mean * mean, 0.0);
  return {mean, var > 0 ? std::sqrt(var) : 1.0};
}

template <class T>
Samples<T> make_samples(const IdxSet& set, Normalisation norm, std::size_t limit) {
  Samples<T> s;
  s.n = limit ? std::min(limit, set.images.count) : set.images.count;
  s.d = set.images.rows * set.images.cols;
  s.x.resize(s.n * s.d);
  for (std::size_t i = 0; i < s.x.size(); ++i)
    s.x[i] = static_cast<T>((set.images.pixels[i] / 255.0 - norm.mean) / norm.std);
  s.y.assign(set.labels.begin(), set.labels.begin() + static_cast<std::ptrdiff_t>(s.n));
  return s;
}

template <class T>
struct Trainer<T>::Impl {
  Options o;
  std::unique_ptr<Backend<T>> be;
  std::vector<int> sizes;
  int layers = 0;
  std::vector<T*> w, b, vw, vb, gw, gb, act, grad;
  T* zeros = nullptr;
  std::int32_t* labels = nullptr;

  gemm::GemmArgs<T> nn(const T* a, const T* bm, T* d, int m, int n, int k) const {
    gemm::GemmArgs<T> g;
    g.op = gemm::Op::nn;
    g.m = m, g.n = n, g.k = k;
    g.a = a, g.lda = std::size_t(k), g.b = bm, g.ldb = std::size_t(n), g.d = d, g.ldc = std::size_t(n);
    return g;
  }

  void forward(const Samples<T>& set, const std::int32_t* rows, int count, bool backward) {
    be->load_batch(set.x.data(), set.y.data(), set.d, rows, count, act[0], labels);
    for (int l = 0; l < layers; ++l) {
      be->gemm(nn(act[l], w[l], act[l + 1], count, sizes[l + 1], sizes[l]));
      be->bias_act(act[l + 1], b[l], count, sizes[l + 1], l + 1 < layers);
    }
    be->softmax_xent(act[layers], labels, count, sizes[layers], backward ? grad[layers] : nullptr);
  }

  void run_step(const Samples<T>& set, const std::int32_t* rows, int count) {
    forward(set, rows, count, true);
    for (int l = layers - 1; l >= 0; --l) {
      const int in = sizes[l], out = sizes[l + 1];
      gemm::GemmArgs<T> tn;  // dW = Aᵀ·dZ: A stored count × in
      tn.op = gemm::Op::tn;
      tn.m = in, tn.n = out, tn.k = count;
      tn.a = act[l], tn.lda = std::size_t(in), tn.b = grad[l + 1], tn.ldb = std::size_t(out);
      tn.d = gw[l], tn.ldc = std::size_t(out);
      be->gemm(tn);
      be->colsum(grad[l + 1], count, out, gb[l]);
      if (l > 0) {
        gemm::GemmArgs<T> nt;  // dA = dZ·Wᵀ + 0: W stored in × out
        nt.op = gemm::Op::nt;
        nt.m = count, nt.n = in, nt.k = out;
        nt.a = grad[l + 1], nt.lda = std::size_t(out), nt.b = w[l], nt.ldb = std::size_t(out);
        nt.c = zeros, nt.d = grad[l], nt.ldc = std::size_t(in);
        be->gemm(nt);
        be->relu_backward(grad[l], act[l], std::size_t(count) * in);
      }
    }
    const T lr = static_cast<T>(o.lr), mu = static_cast<T>(o.momentum);
    for (int l = 0; l < layers; ++l) {
      be->sgd(w[l], vw[l], gw[l], std::size_t(sizes[l]) * sizes[l + 1], lr, mu);
      be->sgd(b[l], vb[l], gb[l], std::size_t(sizes[l + 1]), lr, mu);
    }
  }
};

namespace {

// The network's memory, checked before any of it is allocated (a CPU kernel's on the host, a GPU
// kernel's on the device): each layer's weights, momentum and gradients (in x out and out each),
// a batch's activations and their gradients, the batch's input and a zero buffer; and on the host
// the largest layer's initial weights in double and in T while they go in.
void check_network_memory(const std::vector<int>& sizes, std::size_t batch, std::size_t elem, bool on_host) {
  double values = static_cast<double>(batch) * sizes[0], transient = 0;
  int widest = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    const double in = sizes[l], out = sizes[l + 1];
    values += 3 * (in * out + out) + 2 * static_cast<double>(batch) * out;
    transient = std::max(transient, in * out * static_cast<double>(sizeof(double) + elem));
    widest = std::max({widest, sizes[l], sizes[l + 1]});
  }
  values += static_cast<double>(batch) * widest;
  std::string hidden;
  for (std::size_t l = 1; l + 1 < sizes.size(); ++l) hidden.append(l > 1 ? "," : "").append(std::to_string(sizes[l]));
  const std::string what = "the network of --hidden=" + hidden + " and --batch=" + std::to_string(batch) +
                           " (weights, momentum, gradients, a batch's activations)";
  if (on_host) {
    check_host_memory(values * static_cast<double>(elem) + transient, what);
    return;
  }
  check_host_memory(transient, what);
  check_device_memory(static_cast<std::size_t>(values) * elem, what, "use smaller --hidden layers or --batch");
}

}  // namespace

template <class T>
Trainer<T>::Trainer(const Options& o, std::size_t d, int classes) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = o;
  sizes_ = m.sizes = layer_sizes(o, d, classes);
  const std::size_t batch = static_cast<std::size_t>(o.batch);
  m.be = make_backend<T>(o.backend);  // (refuses a hybrid kernel, a GPU kernel without a GPU)
  check_network_memory(m.sizes, batch, sizeof(T), m.be->device() == "cpu");
  m.layers = static_cast<int>(m.sizes.size()) - 1;
  int widest = 0;
  for (int s : m.sizes) widest = std::max(widest, s);
  m.act.push_back(m.be->alloc(batch * d));
  m.grad.push_back(nullptr);
  for (int l = 0; l < m.layers; ++l) {
    const std::size_t in = std::size_t(m.sizes[l]), out = std::size_t(m.sizes[l + 1]);
    const std::vector<double> init = initial_weights(o.seed, l, m.sizes[l], m.sizes[l + 1]);
    std::vector<T> wt(init.begin(), init.end());
    m.w.push_back(m.be->alloc(in * out));
    m.be->put(m.w.back(), wt.data(), wt.size());
    m.b.push_back(m.be->alloc(out));
    m.vw.push_back(m.be->alloc(in * out));
    m.vb.push_back(m.be->alloc(out));
    m.gw.push_back(m.be->alloc(in * out));
    m.gb.push_back(m.be->alloc(out));
    m.act.push_back(m.be->alloc(batch * out));
    m.grad.push_back(m.be->alloc(batch * out));
  }
  m.zeros = m.be->alloc(batch * std::size_t(widest));
  m.labels = m.be->alloc_labels(batch);
  m.be->take_times();
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
std::string Trainer<T>::device() const {
  return impl_->be->device();
}

template <class T>
double Trainer<T>::step(const Samples<T>& set, const std::int32_t* rows, int count) {
  impl_->run_step(set, rows, count);
  const Metrics m = impl_->be->take_metrics();
  impl_->be->take_times();
  return m.loss_sum / count;
}

template <class T>
Metrics Trainer<T>::evaluate(const Samples<T>& set) {
  Impl& m = *impl_;
  std::vector<std::int32_t> rows(static_cast<std::size_t>(m.o.batch));
  for (std::size_t start = 0; start < set.n; start += rows.size()) {
    const int count = static_cast<int>(std::min(rows.size(), set.n - start));
    for (int i = 0; i < count; ++i) rows[i] = static_cast<std::int32_t>(start + i);
    m.forward(set, rows.data(), count, false);
  }
  return m.be->take_metrics();
}

template <class T>
EpochStats Trainer<T>::epoch(int e, const Samples<T>& train, const Samples<T>& test) {
  Impl& m = *impl_;
  EpochStats s;
  s.epoch = e;
  const std::vector<std::int32_t> order = epoch_order(m.o.seed, e, train.n);
  m.be->take_times();
  Stopwatch watch;
  for (std::size_t start = 0; start < train.n; start += std::size_t(m.o.batch))
    m.run_step(train, order.data() + start, static_cast<int>(std::min<std::size_t>(m.o.batch, train.n - start)));
  const Metrics tm = m.be->take_metrics();
  s.seconds = watch.seconds();
  s.phases = m.be->take_times();
  s.train_loss = tm.loss_sum / static_cast<double>(train.n);
  s.train_accuracy = static_cast<double>(tm.correct) / static_cast<double>(train.n);
  watch.restart();
  const Metrics em = evaluate(test);
  s.eval_seconds = watch.seconds();
  m.be->take_times();
  s.test_loss = em.loss_sum / static_cast<double>(test.n);
  s.test_accuracy = static_cast<double>(em.correct) / static_cast<double>(test.n);
  if (!std::isfinite(s.train_loss))
    throw InputError(strprintf("epoch %d: the training loss is not finite (diverged); lower --lr", e));
  return s;
}

template <class T>
std::vector<T> Trainer<T>::weights(int l) {
  std::vector<T> out(std::size_t(sizes_[l]) * sizes_[l + 1]);
  impl_->be->get(out.data(), impl_->w[l], out.size());
  return out;
}

template <class T>
void Trainer<T>::set_weights(int l, const std::vector<T>& w) {
  if (w.size() != std::size_t(sizes_[l]) * sizes_[l + 1]) throw UsageError("set_weights: wrong size");
  impl_->be->put(impl_->w[l], w.data(), w.size());
}

template <class T>
std::vector<T> Trainer<T>::biases(int l) {
  std::vector<T> out(std::size_t(sizes_[l + 1]));
  impl_->be->get(out.data(), impl_->b[l], out.size());
  return out;
}

template <class T>
std::vector<EpochStats> train(const Options& o, const Samples<T>& train, const Samples<T>& test, int classes,
                              const std::function<void(const EpochStats&)>& observer) {
  validate(o, train.n);
  Trainer<T> t(o, train.d, classes);
  std::vector<EpochStats> out;
  for (int e = 1; e <= o.epochs; ++e) {
    out.push_back(t.epoch(e, train, test));
    if (observer) observer(out.back());
  }
  return out;
}

template class Trainer<float>;
template class Trainer<double>;
template Samples<float> make_samples(const IdxSet&, Normalisation, std::size_t);
template Samples<double> make_samples(const IdxSet&, Normalisation, std::size_t);
template std::vector<EpochStats> train(const Options&, const Samples<float>&, const Samples<float>&, int,
                                       const std::function<void(const EpochStats&)>&);
template std::vector<EpochStats> train(const Options&, const Samples<double>&, const Samples<double>&, int,
                                       const std::function<void(const EpochStats&)>&);

}  // namespace km::mlp
