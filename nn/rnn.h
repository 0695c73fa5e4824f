#pragma once
// The recurrent layers, as torch.nn's LSTM, GRU, LSTMCell and GRUCell, with PyTorch's gate order,
// parameter names and init U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter. Each layer
// projects every step's input in one matmul; then its recurrence is one fused op over the
// sequence (lstm_scan, gru_scan: a GEMM and the gates per step, in one tape node):
//
//   LSTM (gates i, f, g, o):  [i f g o] = x W_ih^T + b_ih + h W_hh^T + b_hh;
//     c' = sigmoid(f) c + sigmoid(i) tanh(g),  h' = sigmoid(o) tanh(c')
//   GRU (gates r, z, n):  [r_x z_x n_x] = x W_ih^T + b_ih,  [r_h z_h n_h] = h W_hh^T + b_hh;
//     r = sigmoid(r_x + r_h), z = sigmoid(z_x + z_h), n = tanh(n_x + r n_h),  h' = (1 - z) n + z h
//
// A sequence is (T, B, input) ((B, T, input) with batch_first) or unbatched (T, input); the
// states are (num_layers, B, hidden) (unbatched (num_layers, hidden)), zero when not given.
// Layer k > 0 reads layer k - 1's outputs. Parameters: weight_ih_l{k} (G hidden, in),
// weight_hh_l{k} (G hidden, hidden), bias_ih_l{k}, bias_hh_l{k} (G hidden), G = 4 or 3.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/nn/module.h>

namespace tg::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
};

/// An LSTM's (h, c): each (num_layers, B, hidden) for the layers, (B, hidden) for a cell.
struct LSTMState {
  Tensor h, c;
};

struct LSTMOutput {
  Tensor output;    // (T, B, hidden) (batch_first: (B, T, hidden)): the last layer's h at every step
  LSTMState state;  // (h_n, c_n)
};

struct GRUOutput {
  Tensor output;  // as LSTMOutput's
  Tensor h_n;     // (num_layers, B, hidden)
};

/// What LSTM and GRU share: the parameters of every layer and the run over time.
class RNNBase : public Module {
 public:
  struct Layer {
    Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined without bias
  };
  /// One layer over a sequence: (its parameters, its input (T, B, in), its initial state
  /// (B, hidden) each, h first) -> {its h at every step (T, B, hidden), its final state}.
  using Scan = std::vector<Tensor> (*)(const Layer&, const Tensor&, const std::vector<Tensor>&);

  int64_t input_size, hidden_size;
  RNNOptions options;
  std::vector<Layer> layers;

 protected:
  /// Throws ValueError for sizes < 1, num_layers < 1 or an int64 dtype.
  RNNBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size, Rng& rng,
          RNNOptions o, Dtype dtype);
  /// Runs every layer over the sequence by `scan`. `states` are the
  /// initial ones, (num_layers, B, hidden) or undefined. Returns the output in the input's layout
  /// and the final states (num_layers, B, hidden). Throws ShapeError naming the layer and shapes.
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& x, std::vector<Tensor> states,
                                             Scan scan) const;

 private:
  std::string name() const;
  const char* kind_;
};

/// torch.nn.LSTM(input_size, hidden_size, num_layers, bias, batch_first).
class LSTM : public RNNBase {
 public:
  /// Throws ValueError for sizes < 1, num_layers < 1 or an int64 dtype.
  LSTM(int64_t input_size, int64_t hidden_size, Rng& rng, RNNOptions o = {},
       Dtype dtype = get_default_dtype());
  /// The sequence x and the initial (h_0, c_0) (both or neither given) -> output and (h_n, c_n).
  /// Throws ShapeError for a wrong rank or size of x, h_0 or c_0.
  LSTMOutput forward(const Tensor& x, const LSTMState& state = {}) const;
  LSTMOutput operator()(const Tensor& x, const LSTMState& state = {}) const {
    LSTMOutput out = forward(x, state);
    if (!has_forward_hooks()) return out;
    std::vector<Tensor> outputs{out.output, out.state.h, out.state.c};  // as PyTorch's (output, (h_n, c_n))
    run_forward_hooks({x, state.h, state.c}, outputs);
    return {outputs[0], {outputs[1], outputs[2]}};
  }
};

/// torch.nn.GRU(input_size, hidden_size, num_layers, bias, batch_first).
class GRU : public RNNBase {
 public:
  /// The sequence x and the initial h_0 (undefined: zeros) -> output and h_n. Throws
  /// ShapeError for a wrong rank or size of x or h_0.
  GRUOutput forward(const Tensor& x, const Tensor& h0 = {}) const;
  GRUOutput operator()(const Tensor& x, const Tensor& h0 = {}) const {
    GRUOutput out = forward(x, h0);
    if (!has_forward_hooks()) return out;
    std::vector<Tensor> outputs{out.output, out.h_n};
    run_forward_hooks({x, h0}, outputs);
    return {outputs[0], outputs[1]};
  }

  /// As LSTM's.
  GRU(int64_t input_size, int64_t hidden_size, Rng& rng, RNNOptions o = {},
      Dtype dtype = get_default_dtype());
};

/// What LSTMCell and GRUCell share: one layer's parameters, named weight_ih, weight_hh, bias_ih,
/// bias_hh.
class RNNCellBase : public Module {
 public:
  int64_t input_size, hidden_size;
  RNNBase::Layer p;

 protected:
  /// Throws ValueError for sizes < 1 or an int64 dtype.
  RNNCellBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size, Rng& rng,
              bool bias, Dtype dtype);
  /// x (B, input) or (input,) and the states (B, hidden) or (hidden,), zeros when undefined, ->
  /// the cell's new states, unbatched again for an unbatched x. Throws ShapeError.
  std::vector<Tensor> step(const Tensor& x, std::vector<Tensor> states, RNNBase::Scan scan) const;

 private:
  const char* kind_;
};

/// torch.nn.LSTMCell(input_size, hidden_size, bias): one step of the LSTM.
class LSTMCell : public RNNCellBase {
 public:
  /// Throws ValueError for sizes < 1 or an int64 dtype.
  LSTMCell(int64_t input_size, int64_t hidden_size, Rng& rng, bool bias = true,
           Dtype dtype = get_default_dtype());
  LSTMState operator()(const Tensor& x, const LSTMState& state = {}) const {
    LSTMState out = forward(x, state);
    if (!has_forward_hooks()) return out;
    std::vector<Tensor> outputs{out.h, out.c};
    run_forward_hooks({x, state.h, state.c}, outputs);
    return {outputs[0], outputs[1]};
  }
  /// x and (h, c) (both or neither given) -> (h', c'). Throws ShapeError for wrong shapes.
  LSTMState forward(const Tensor& x, const LSTMState& state = {}) const;
};

/// torch.nn.GRUCell(input_size, hidden_size, bias): one step of the GRU.
class GRUCell : public RNNCellBase {
 public:
  /// x and h -> h'. Throws ShapeError for wrong shapes.
  Tensor forward(const Tensor& x, const Tensor& h = {}) const;
  Tensor operator()(const Tensor& x, const Tensor& h = {}) const { return hooked({x, h}, forward(x, h)); }

  /// As LSTMCell's.
  GRUCell(int64_t input_size, int64_t hidden_size, Rng& rng, bool bias = true,
          Dtype dtype = get_default_dtype());
};

}  // namespace tg::nn
