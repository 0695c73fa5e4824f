#include <iostream>
#include <tapegrad/tapegrad.h>

int main() {
  tg::set_default_dtype(tg::Dtype::f64);                       // gradcheck runs in double
  tg::Rng rng(0);
  tg::AttentionOptions options;
  options.heads = 2;
  options.rope = true;
  tg::nn::QKVAttention layer(/*D=*/8, /*d_k=*/8, /*d_v=*/8, options, /*output_proj=*/true, rng);
  tg::Tensor X = tg::randn({2, 16, 8}, rng);                   // (B, T, D)
  tg::Tensor loss = tg::attention_loss(layer.forward(X).Y);    // 0.5 * sum(Y^2)
  loss.backward();                                             // fills W_Q.grad(), ...
  std::cout << "loss " << loss.item() << ", dL/dW_Q[0,0] " << layer.W_Q.grad().at({0, 0}) << "\n";
  auto f = [&](const std::vector<tg::Tensor>& in) { return layer.forward(in[0]).Y; };
  return tg::gradcheck(f, {X}).passed ? 0 : 1;                 // every dY/dX entry vs finite differences
}
