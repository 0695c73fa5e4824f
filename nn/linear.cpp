#include <tapegrad/nn/linear.h>

#include <cmath>
#include <string>

#include <tapegrad/nn/init.h>
#include <tapegrad/ops/linear.h>

namespace tg::nn {

namespace {
std::string name(int64_t in, int64_t out) {
  return "Linear(" + std::to_string(in) + ", " + std::to_string(out) + ")";
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool has_bias, Rng& rng, Dtype dtype,
               std::optional<double> init_std)
    : in_features(in), out_features(out) {
  if (in < 0 || out < 0 || !is_floating(dtype))
    throw ValueError(name(in, out) + ": sizes must be >= 0 and the dtype float32 or float64");
  if (init_std) {  // nanoGPT's
    weight = randn({out, in}, rng, dtype, *init_std);
    if (has_bias) bias = zeros({out}, dtype);
  } else {  // torch.nn.Linear.reset_parameters
    weight = Tensor(Shape{out, in}, dtype);
    init::kaiming_uniform_(weight, rng, std::sqrt(5.0));
    if (has_bias) {
      bias = Tensor(Shape{out}, dtype);
      const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
      init::uniform_(bias, rng, -bound, bound);
    }
  }
  register_parameter("weight", weight);
  if (has_bias) register_parameter("bias", bias);
}

Tensor Linear::forward(const Tensor& x) const {
  if (x.rank() < 2 || x.size(-1) != in_features)
    throw ShapeError(name(in_features, out_features) + ": input " + x.shape().str() +
                     " must be (..., " + std::to_string(in_features) + ") of rank >= 2");
  return linear(x, weight, bias);  // (..., out)
}

}  // namespace tg::nn
