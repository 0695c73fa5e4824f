// `tapegrad check`: gradcheck (and gradgradcheck where the case asks for it) and forward mode
// (check_forward_ad: J t against central differences and the reverse pass, and forward over
// reverse where the case is second order) of every op case in the registry (every op of the op
// list must have one), of the attention models and of a tiny GPT, as one table:
//
//   op / case               shapes               check     max abs err  max rel err  result
//   matmul/2d               (3, 4), (4, 2)       grad      1.2e-10      3.4e-09      PASS
//   matmul/2d               (3, 4), (4, 2)       forward   3.1e-11      2.0e-09      PASS
//
// A model case checks the full Jacobian of Y with respect to X and every weight. A check whose
// Jacobians are both zero proves nothing and counts as a failure; so does a case that throws.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/check/registry.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/ops/op_list.h>
#include "tools/commands.h"
#include "tools/demo_util.h"

namespace tg {

namespace {

struct Row {
  std::string name;    // "softmax/masked_row"
  std::string shapes;  // "(3, 4), (4, 2)"
  std::string check;   // "grad", "gradgrad" or "forward"
  double max_abs = 0, max_rel = 0;
  bool passed = false;
  std::string message;  // why it failed
};

enum class Check { grad, gradgrad, forward };

// One gradcheck, gradgradcheck or forward-mode check (second order where `second_order`),
// caught: a throwing case is a failed row, not a crash.
Row run_one(const std::string& name, const std::string& shapes, Check check, bool second_order,
            const Function& fn, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  Row row;
  row.name = name;
  row.shapes = shapes;
  row.check = check == Check::grad ? "grad" : check == Check::gradgrad ? "gradgrad" : "forward";
  options.warn_vacuous = false;  // reported in the table instead of on stderr
  options.check_forward_ad = false;  // a row of its own
  try {
    const GradcheckResult r = check == Check::grad       ? gradcheck(fn, inputs, options)
                              : check == Check::gradgrad ? gradgradcheck(fn, inputs, options)
                                                         : check_forward_ad(fn, inputs, options, second_order);
    row.max_abs = r.max_abs_error;
    row.max_rel = r.max_rel_error;
    row.passed = r.passed && !r.vacuous;
    row.message = r.vacuous && r.warnings.size() ? r.warnings.front() : r.message;
  } catch (const std::exception& e) {
    row.message = std::string("threw: ") + e.what();
  }
  return row;
}

// The rows of one case: grad, gradgrad (second order), forward.
void add_rows(std::vector<Row>& rows, const std::string& name, const std::string& shapes, bool second_order,
              const Function& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  rows.push_back(run_one(name, shapes, Check::grad, false, fn, inputs, options));
  if (second_order) rows.push_back(run_one(name, shapes, Check::gradgrad, true, fn, inputs, options));
  rows.push_back(run_one(name, shapes, Check::forward, second_order, fn, inputs, options));
}

// ---- the model cases --------------------------------------------------------------------

struct ModelCase {
  std::string name;
  std::vector<int64_t> x_shape;  // (T, D) or (B, T, D)
  int64_t d_k, d_v;
  bool output_proj;
  AttentionOptions options;
};

// Small enough for a full Jacobian and a full grad-of-grad in well under a second.
std::vector<ModelCase> model_cases() {
  AttentionOptions plain, window, no_scale, rope, multi, multi_2d;
  window.window = 2;
  no_scale.scale = false;
  rope.rope = true;
  rope.rope_base = 100.0;  // larger angles than 10000 at T = 5
  multi.heads = 2;
  multi.rope = true;
  multi.window = 3;
  multi_2d.heads = 2;
  return {
      {"single_head", {5, 4}, 4, 4, false, plain},
      {"single_head/W_O", {5, 4}, 4, 4, true, plain},
      {"single_head/window2", {5, 4}, 4, 4, false, window},
      {"single_head/no_scale", {5, 4}, 4, 4, false, no_scale},
      {"single_head/rope", {5, 4}, 4, 4, false, rope},
      {"single_head/batched_W_O_window2", {2, 4, 4}, 4, 2, true, window},
      {"multi_head/B2_H2_rope_W_O_window3", {2, 4, 4}, 4, 4, true, multi},
      {"multi_head/2d_H2_W_O", {5, 4}, 4, 6, true, multi_2d},
  };
}

// "X (5, 4), W_Q (4, 4), ...": the model's input shapes.
std::string model_shapes(const std::vector<Tensor>& inputs) {
  static const char* const kNames[] = {"X", "W_Q", "W_K", "W_V", "W_O"};
  std::string s;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    s += std::string(i ? ", " : "") + kNames[i] + " " + inputs[i].shape().str();
  return s;
}

void add_model_rows(std::vector<Row>& rows) {
  uint64_t seed = 1000;
  for (const ModelCase& c : model_cases()) {
    Rng rng(++seed);
    const int64_t D = c.x_shape.back();
    // Weights of scale 0.5 keep the softmax off saturation, where gradients vanish and a check
    // proves little.
    auto weight = [&](int64_t rows, int64_t cols) {
      return randn({rows, cols}, rng, Dtype::f64, 0.5);
    };
    std::vector<Tensor> inputs = {randn(Shape(c.x_shape), rng, Dtype::f64), weight(D, c.d_k),
                                  weight(D, c.d_k), weight(D, c.d_v)};
    if (c.output_proj) inputs.push_back(weight(c.d_v, c.d_v));
    AttentionOptions o = c.options;
    o.need_weights = true;  // the composed ops: their grad-of-grad is part of the check
    const Function fn = [o](const std::vector<Tensor>& x) {
      const Tensor W_O = x.size() > 4 ? x[4] : Tensor();
      const AttentionOutput out = o.heads == 1
                                      ? single_head_attention(x[0], x[1], x[2], x[3], W_O, o)
                                      : multi_head_attention(x[0], x[1], x[2], x[3], W_O, o);
      return std::vector<Tensor>{out.Y};
    };
    add_rows(rows, "model/" + c.name, model_shapes(inputs), true, fn, inputs, {});
  }
}

// A tiny GPT (nanoGPT's architecture; vocab 5, block 4, 2 layers, 2 heads, width 4) in float64:
// the loss's gradient in every parameter, for each MLP nonlinearity and for attention-only
// blocks. Parameters are drawn wider than the init so every path carries signal.
void add_gpt_rows(std::vector<Row>& rows) {
  struct GptCase {
    std::string name;
    bool bias, attention_only;
    nn::GeluKind gelu;
  };
  for (const GptCase& c : {GptCase{"gpt/tanh", true, false, nn::GeluKind::tanh},
                           GptCase{"gpt/erf_no_bias", false, false, nn::GeluKind::erf},
                           GptCase{"gpt/attention_only", true, true, nn::GeluKind::tanh}}) {
    nn::GPTConfig config{.vocab_size = 5, .block_size = 4, .n_layer = 2, .n_head = 2,
                         .n_embd = 4, .bias = c.bias, .gelu = c.gelu,
                         .attention_only = c.attention_only, .dtype = Dtype::f64};
    Rng rng(7);
    auto model = std::make_shared<nn::GPT>(config, rng);
    std::vector<std::string> names;
    std::vector<Tensor> inputs;
    for (const auto& [name, p] : model->named_parameters()) {
      names.push_back(name);
      inputs.push_back(randn(p.shape(), rng, Dtype::f64, 0.5));
    }
    const Tensor idx = from_indices({0, 3, 1, 4, 2, 2, 0, 1}, {2, 4});
    const Tensor targets = from_indices({3, 1, 4, -1, 2, 0, 1, 3}, {2, 4});
    const Function fn = [model, names, idx, targets](const std::vector<Tensor>& params) {
      for (std::size_t i = 0; i < params.size(); ++i) model->set_parameter(names[i], params[i]);
      return std::vector<Tensor>{model->loss(idx, targets)};
    };
    add_rows(rows, "model/" + c.name, std::to_string(inputs.size()) + " parameters", false, fn, inputs, {});
  }
}

// ---- the table --------------------------------------------------------------------------

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

void print_table(std::ostream& out, const std::vector<Row>& rows) {
  std::size_t w_name = 9, w_shapes = 6;  // "op / case", "shapes"
  for (const Row& r : rows) {
    w_name = std::max(w_name, r.name.size());
    w_shapes = std::max(w_shapes, r.shapes.size());
  }
  w_name += 2;
  w_shapes += 2;
  out << pad("op / case", w_name) << pad("shapes", w_shapes) << pad("check", 10)
      << pad("max abs err", 13) << pad("max rel err", 13) << "result\n";
  for (const Row& r : rows)
    out << pad(r.name, w_name) << pad(r.shapes, w_shapes) << pad(r.check, 10)
        << pad(demo::sci(r.max_abs, 1), 13) << pad(demo::sci(r.max_rel, 1), 13) << (r.passed ? "PASS" : "FAIL")
        << "\n";
}

}  // namespace

int run_check(std::ostream& out) {
  std::vector<Row> rows;
  const std::vector<OpCase> cases = op_cases();
  for (const OpCase& c : cases) add_rows(rows, c.name, c.shapes(), c.second_order, c.fn, c.inputs, c.options);
  add_model_rows(rows);
  add_gpt_rows(rows);
  // Every op of the op list must have cases: one without is a failure, not a silent gap.
  for (const OpInfo& op : op_list()) {
    if (std::none_of(cases.begin(), cases.end(), [&](const OpCase& c) { return c.op == op.name; })) {
      Row row;
      row.name = std::string(op.name) + "/*";
      row.check = "cases";
      row.message = "no registry case for this op";
      rows.push_back(row);
    }
  }

  print_table(out, rows);
  int failed = 0;
  for (const Row& r : rows) failed += r.passed ? 0 : 1;
  if (failed > 0) {
    out << "\nFailures:\n";
    for (const Row& r : rows)
      if (!r.passed) out << "  " << r.name << " (" << r.check << "): " << r.message << "\n";
  }
  out << "\n" << rows.size() << " checks, " << rows.size() - failed << " passed, " << failed
      << " failed\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace tg
