#include <tapegrad/nn/rnn.h>

#include <cmath>
#include <string>

#include <tapegrad/nn/init.h>
#include <tapegrad/ops/gru_scan.h>
#include <tapegrad/ops/lstm_scan.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/transpose.h>

namespace tg::nn {

namespace {

// One layer's parameters, every one U(-1/sqrt(H), 1/sqrt(H)) as torch.nn.RNNBase.reset_parameters.
RNNBase::Layer make_layer(int64_t gates, int64_t in, int64_t H, bool bias, Rng& rng, Dtype dtype) {
  const double k = 1.0 / std::sqrt(static_cast<double>(H));
  const auto draw = [&](const Shape& s) { return uniform(s, rng, -k, k, dtype); };
  RNNBase::Layer l{draw({gates * H, in}), draw({gates * H, H}), {}, {}};
  if (bias) {
    l.bias_ih = draw({gates * H});
    l.bias_hh = draw({gates * H});
  }
  return l;
}

void check_sizes(const std::string& who, int64_t in, int64_t H, Dtype dtype) {
  if (in < 1 || H < 1 || !is_floating(dtype))
    throw ValueError(who + ": sizes must be >= 1 and the dtype float32 or float64");
}

// x W^T + b, for x (..., in), W (out, in), b (out) or undefined.
Tensor affine(const Tensor& x, const Tensor& W, const Tensor& b) {
  const Tensor y = matmul(x, W, false, true);  // (..., out)
  return b.defined() ? add(y, b) : y;
}

// x (T, B, in), state {h, c} (B, H) each: every step's input projection in one matmul, then one
// lstm_scan node for the recurrence (which adds the biases).
std::vector<Tensor> lstm_layer(const RNNBase::Layer& p, const Tensor& x,
                               const std::vector<Tensor>& state) {
  const int64_t T = x.size(0), B = x.size(1), H = state[0].size(-1);
  const Tensor gi = matmul(x, p.weight_ih, false, true);  // (T, B, 4H)
  const Tensor bias = p.bias_ih.defined() ? add(p.bias_ih, p.bias_hh) : Tensor();
  const Tensor Y = reshape(lstm_scan(gi, p.weight_hh, bias, state[0], state[1]), {2 * T, B, H});
  return {narrow(Y, 0, 0, T), reshape(narrow(Y, 0, T - 1, 1), {B, H}),
          reshape(narrow(Y, 0, 2 * T - 1, 1), {B, H})};
}

// x (T, B, in), state {h} (B, H): every step's input projection in one matmul (with b_ih), then
// one gru_scan node for the recurrence.
std::vector<Tensor> gru_layer(const RNNBase::Layer& p, const Tensor& x,
                              const std::vector<Tensor>& state) {
  const int64_t T = x.size(0), B = x.size(1), H = state[0].size(-1);
  const Tensor gi = affine(x, p.weight_ih, p.bias_ih);  // (T, B, 3H)
  const Tensor Y = gru_scan(gi, p.weight_hh, p.bias_hh, state[0]);  // (T, B, H)
  return {Y, reshape(narrow(Y, 0, T - 1, 1), {B, H})};
}

}  // namespace

RNNBase::RNNBase(const char* kind, int64_t gates, int64_t I, int64_t H, Rng& rng, RNNOptions o,
                 Dtype dtype)
    : input_size(I), hidden_size(H), options(o), kind_(kind) {
  check_sizes(name(), I, H, dtype);
  if (o.num_layers < 1) throw ValueError(name() + ": num_layers must be >= 1");
  layers.reserve(o.num_layers);  // registered by address: never reallocated
  for (int64_t k = 0; k < o.num_layers; ++k) {
    layers.push_back(make_layer(gates, k == 0 ? I : H, H, o.bias, rng, dtype));
    Layer& l = layers.back();
    const std::string s = "_l" + std::to_string(k);
    register_parameter("weight_ih" + s, l.weight_ih);
    register_parameter("weight_hh" + s, l.weight_hh);
    if (o.bias) {
      register_parameter("bias_ih" + s, l.bias_ih);
      register_parameter("bias_hh" + s, l.bias_hh);
    }
  }
}

std::string RNNBase::name() const {
  return std::string(kind_) + "(" + std::to_string(input_size) + ", " +
         std::to_string(hidden_size) + ", num_layers=" + std::to_string(options.num_layers) + ")";
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::run(const Tensor& x_in, std::vector<Tensor> states,
                                                    Scan scan) const {
  const int64_t L = options.num_layers, H = hidden_size;
  if ((x_in.rank() != 2 && x_in.rank() != 3) || x_in.size(-1) != input_size)
    throw ShapeError(name() + ": input " + x_in.shape().str() + " must be (T, B, " +
                     std::to_string(input_size) + ")" + (options.batch_first ? " (batch_first: (B, T, ...))" : "") +
                     " or unbatched (T, " + std::to_string(input_size) + ")");
  const bool batched = x_in.rank() == 3;
  Tensor x = batched ? x_in : reshape(x_in, {x_in.size(0), 1, input_size});  // (T, B, I)
  if (batched && options.batch_first) x = transpose(x, 0, 1);
  const int64_t T = x.size(0), B = x.size(1);
  const Shape state_shape = batched ? Shape{L, B, H} : Shape{L, H};
  for (Tensor& s : states) {
    if (!s.defined()) {
      s = zeros({L, B, H}, x.dtype());
    } else if (s.shape() != state_shape) {
      throw ShapeError(name() + ": state " + s.shape().str() + " must be " + state_shape.str() +
                       " for input " + x_in.shape().str());
    } else if (!batched) {
      s = reshape(s, {L, 1, H});
    }
  }
  if (T == 0)
    throw ShapeError(name() + ": input " + x_in.shape().str() + " is a sequence of length 0");
  std::vector<std::vector<Tensor>> last(states.size());  // per state, per layer: (1, B, H)
  for (int64_t k = 0; k < L; ++k) {
    std::vector<Tensor> st;
    for (const Tensor& s : states) st.push_back(reshape(narrow(s, 0, k, 1), {B, H}));
    const std::vector<Tensor> r = scan(layers[k], x, st);
    x = r[0];  // (T, B, H): the next layer's input
    for (std::size_t j = 0; j < st.size(); ++j) last[j].push_back(reshape(r[1 + j], {1, B, H}));
  }
  std::vector<Tensor> finals;
  for (const auto& per_layer : last) {
    const Tensor s = cat(per_layer, 0);  // (L, B, H)
    finals.push_back(batched ? s : reshape(s, {L, H}));
  }
  if (!batched) return {reshape(x, {T, H}), finals};
  return {options.batch_first ? transpose(x, 0, 1) : x, finals};
}

LSTM::LSTM(int64_t I, int64_t H, Rng& rng, RNNOptions o, Dtype dtype)
    : RNNBase("LSTM", 4, I, H, rng, o, dtype) {}

GRU::GRU(int64_t I, int64_t H, Rng& rng, RNNOptions o, Dtype dtype)
    : RNNBase("GRU", 3, I, H, rng, o, dtype) {}

LSTMCell::LSTMCell(int64_t I, int64_t H, Rng& rng, bool bias, Dtype dtype)
    : RNNCellBase("LSTMCell", 4, I, H, rng, bias, dtype) {}

GRUCell::GRUCell(int64_t I, int64_t H, Rng& rng, bool bias, Dtype dtype)
    : RNNCellBase("GRUCell", 3, I, H, rng, bias, dtype) {}

LSTMOutput LSTM::forward(const Tensor& x, const LSTMState& state) const {
  if (state.h.defined() != state.c.defined())
    throw ShapeError("LSTM: give both h_0 and c_0 or neither, for input " + x.shape().str());
  auto [out, finals] = run(x, {state.h, state.c}, lstm_layer);
  return {out, {finals[0], finals[1]}};
}

GRUOutput GRU::forward(const Tensor& x, const Tensor& h0) const {
  auto [out, finals] = run(x, {h0}, gru_layer);
  return {out, finals[0]};
}

RNNCellBase::RNNCellBase(const char* kind, int64_t gates, int64_t I, int64_t H, Rng& rng,
                         bool bias, Dtype dtype)
    : input_size(I), hidden_size(H), kind_(kind) {
  check_sizes(std::string(kind) + "(" + std::to_string(I) + ", " + std::to_string(H) + ")", I, H,
              dtype);
  p = make_layer(gates, I, H, bias, rng, dtype);
  register_parameter("weight_ih", p.weight_ih);
  register_parameter("weight_hh", p.weight_hh);
  if (bias) {
    register_parameter("bias_ih", p.bias_ih);
    register_parameter("bias_hh", p.bias_hh);
  }
}

std::vector<Tensor> RNNCellBase::step(const Tensor& x_in, std::vector<Tensor> states,
                                      RNNBase::Scan scan) const {
  const std::string who = std::string(kind_) + "(" + std::to_string(input_size) + ", " +
                          std::to_string(hidden_size) + ")";
  if ((x_in.rank() != 1 && x_in.rank() != 2) || x_in.size(-1) != input_size)
    throw ShapeError(who + ": input " + x_in.shape().str() + " must be (B, " +
                     std::to_string(input_size) + ") or (" + std::to_string(input_size) + ",)");
  const bool batched = x_in.rank() == 2;
  const Tensor x = batched ? x_in : reshape(x_in, {1, input_size});  // (B, I)
  const int64_t B = x.size(0), H = hidden_size;
  const Shape state_shape = batched ? Shape{B, H} : Shape{H};
  for (Tensor& s : states) {
    if (!s.defined()) s = zeros({B, H}, x.dtype());
    else if (s.shape() != state_shape)
      throw ShapeError(who + ": state " + s.shape().str() + " must be " + state_shape.str() +
                       " for input " + x_in.shape().str());
    else if (!batched) s = reshape(s, {1, H});
  }
  std::vector<Tensor> r = scan(p, reshape(x, {1, B, input_size}), states);  // a sequence of one
  std::vector<Tensor> next(r.begin() + 1, r.end());
  if (!batched)
    for (Tensor& s : next) s = reshape(s, {H});
  return next;
}

LSTMState LSTMCell::forward(const Tensor& x, const LSTMState& state) const {
  if (state.h.defined() != state.c.defined())
    throw ShapeError("LSTMCell: give both h and c or neither, for input " + x.shape().str());
  const std::vector<Tensor> s = step(x, {state.h, state.c}, lstm_layer);
  return {s[0], s[1]};
}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) const {
  return step(x, {h}, gru_layer)[0];
}

}  // namespace tg::nn
