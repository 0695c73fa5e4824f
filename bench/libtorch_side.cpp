// libtorch's side of compare_pytorch.py: PyTorch's own C++ API (Debian's libtorch-dev 1.13), no
// Python in the loop. The same measurements as torch_side.py, one per process, one JSON line on
// stdout:
//
//   libtorch_side info THREADS
//   libtorch_side attention B T D H float|double Fwd|FwdBwd THREADS MIN_TIME
//   libtorch_side gpt float|double THREADS MIN_TIME
//   libtorch_side op_chain N float|double fwdbwd|fwd THREADS MIN_TIME
//
// The attention is composed as nanoGPT writes it (libtorch 1.13 has no fused attention); the GPT
// step is nanoGPT's model, AdamW and clipping as torch_side.py runs them, written with torch::nn.

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds per step after two warm-up steps (which touch the fresh pages), as torch_side.py's
// time_loop: at least min_time and 3 steps.
void time_loop(const std::function<void()>& step, double min_time) {
  for (int i = 0; i < 2; ++i) step();
  const auto start = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  int n = 0;
  double elapsed = 0;
  do {
    step();
    ++n;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < min_time || n < 3);
  const double cpu = cpu_seconds() - cpu0;
  std::printf(
      "{\"seconds\": %.9g, \"cpu_seconds\": %.9g, \"threads\": %d, \"cores\": %.4f}\n",
      elapsed / n, cpu / n, at::get_num_threads(), cpu / elapsed);
}

torch::Dtype dtype_of(const std::string& name) {
  if (name == "float") return torch::kFloat32;
  if (name == "double") return torch::kFloat64;
  throw std::invalid_argument("dtype must be float or double, got " + name);
}

// X (B, T, D) through W_Q, W_K, W_V, W_O (D, D), H heads, L = 0.5 sum(Y^2).
void attention(int64_t B, int64_t T, int64_t D, int64_t H, torch::Dtype dt,
               const std::string& mode, double min_time) {
  torch::manual_seed(0);
  const auto opts = torch::TensorOptions().dtype(dt);
  const torch::Tensor X = torch::randn({B, T, D}, opts);
  std::vector<torch::Tensor> W;
  for (int i = 0; i < 4; ++i)
    W.push_back((torch::randn({D, D}, opts) / std::sqrt(double(D))).requires_grad_());
  const torch::Tensor mask = torch::triu(torch::full({T, T}, -INFINITY, opts), 1);
  const int64_t dh = D / H;
  auto forward = [&] {
    auto heads = [&](const torch::Tensor& P) { return P.view({B, T, H, dh}).transpose(1, 2); };
    const torch::Tensor q = heads(X.matmul(W[0]));  // (B, H, T, dh)
    const torch::Tensor k = heads(X.matmul(W[1]));
    const torch::Tensor v = heads(X.matmul(W[2]));
    const torch::Tensor a =
        torch::softmax(q.matmul(k.transpose(-2, -1)) / std::sqrt(double(dh)) + mask, -1);
    const torch::Tensor y = a.matmul(v).transpose(1, 2).reshape({B, T, D}).matmul(W[3]);
    return 0.5 * (y * y).sum();
  };
  time_loop(
      [&] {
        if (mode == "Fwd") {
          torch::NoGradGuard no_grad;
          forward();
        } else {
          for (torch::Tensor& w : W) w.mutable_grad() = torch::Tensor();
          forward().backward();
        }
      },
      min_time);
}

// nanoGPT's model (tests/gpt_reference.py's, in torch::nn), GELU tanh as tapegrad's default.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t C, int64_t H)
      : H_(H),
        ln_1(register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})))),
        c_attn(register_module("c_attn", torch::nn::Linear(C, 3 * C))),
        attn_proj(register_module("attn_proj", torch::nn::Linear(C, C))),
        ln_2(register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})))),
        c_fc(register_module("c_fc", torch::nn::Linear(C, 4 * C))),
        mlp_proj(register_module("mlp_proj", torch::nn::Linear(4 * C, C))) {}

  torch::Tensor attn(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    const auto qkv = c_attn(x).split(C, 2);  // 3 x (B, T, C)
    auto heads = [&](const torch::Tensor& P) {
      return P.view({B, T, H_, C / H_}).transpose(1, 2);  // (B, H, T, d)
    };
    const torch::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    const torch::Tensor causal = torch::ones({T, T}, torch::kBool).tril();
    const torch::Tensor att = (q.matmul(k.transpose(-2, -1)) / std::sqrt(double(k.size(-1))))
                                  .masked_fill(causal.logical_not(), -INFINITY)
                                  .softmax(-1);                                 // (B, H, T, T)
    return attn_proj(att.matmul(v).transpose(1, 2).contiguous().view({B, T, C}));  // (B, T, C)
  }

  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(ln_1(x));
    return x + mlp_proj(torch::gelu(c_fc(ln_2(x)), "tanh"));
  }

  int64_t H_;
  torch::nn::LayerNorm ln_1;
  torch::nn::Linear c_attn, attn_proj;
  torch::nn::LayerNorm ln_2;
  torch::nn::Linear c_fc, mlp_proj;
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  GPTImpl(int64_t V, int64_t T, int64_t L, int64_t H, int64_t C)
      : wte(register_module("wte", torch::nn::Embedding(V, C))),
        wpe(register_module("wpe", torch::nn::Embedding(T, C))),
        h(register_module("h", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})))) {
    for (int64_t i = 0; i < L; ++i) h->push_back(Block(C, H));
  }

  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets) {
    const int64_t T = idx.size(1);
    torch::Tensor x = wte(idx) + wpe(torch::arange(T));             // (B, T, C)
    for (const auto& block : *h) x = block->as<Block>()->forward(x);  // (B, T, C)
    const torch::Tensor logits = ln_f(x).matmul(wte->weight.t());    // (B, T, V): tied head
    return torch::nn::functional::cross_entropy(
        logits.view({-1, logits.size(-1)}), targets.view(-1),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
  }

  torch::nn::Embedding wte, wpe;
  torch::nn::ModuleList h;
  torch::nn::LayerNorm ln_f;
};
TORCH_MODULE(GPT);

// One nanoGPT training step of the CPU recipe (V 65, L 4, H 4, C 128, T 64, B 12): forward,
// cross-entropy, backward, clip_grad_norm_ 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), weight decay
// 0.1 on rank >= 2 parameters), zero_grad, as torch_side.py's gpt and BM_GPT_TrainStep.
void gpt(torch::Dtype dt, double min_time) {
  const int64_t V = 65, L = 4, H = 4, C = 128, T = 64, B = 12;
  torch::manual_seed(0);
  torch::set_default_dtype(caffe2::TypeMeta::fromScalarType(dt));
  GPT model(V, T, L, H, C);
  for (auto& p : model->named_parameters()) {  // nanoGPT's init (only for likeness)
    if (p.value().dim() < 2) continue;
    const bool proj = p.key().find("proj.weight") != std::string::npos;
    torch::NoGradGuard no_grad;
    p.value().normal_(0.0, proj ? 0.02 / std::sqrt(2.0 * L) : 0.02);
  }
  model->train();
  std::vector<torch::Tensor> params = model->parameters(), decay, no_decay;
  for (const torch::Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto group = [](std::vector<torch::Tensor> ps, double wd) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(1e-3);
    o->betas({0.9, 0.99}).eps(1e-8).weight_decay(wd);
    return torch::optim::OptimizerParamGroup(std::move(ps), std::move(o));
  };
  torch::optim::AdamW opt({group(decay, 0.1), group(no_decay, 0.0)},
                          torch::optim::AdamWOptions(1e-3));
  const torch::Tensor x = torch::randint(V, {B, T}, torch::kLong);
  const torch::Tensor y = torch::randint(V, {B, T}, torch::kLong);
  time_loop(
      [&] {
        model->loss(x, y).backward();
        torch::nn::utils::clip_grad_norm_(params, 1.0);
        opt.step();
        opt.zero_grad();
      },
      min_time);
}

// A chain of n scalar ops, y = y * w + b repeated, on leaves that take a gradient (torch_side.py's
// op_chain, BM_OpChain_FwdBwd / BM_OpChain_Fwd): "fwdbwd" records it and runs its backward into
// x, w and b; "fwd" runs it under NoGradGuard. Seconds per chain: divide by n for an op's cost.
void op_chain(int64_t n, torch::Dtype dt, const std::string& mode, double min_time) {
  if (mode != "fwdbwd" && mode != "fwd")
    throw std::invalid_argument("op_chain's mode must be fwdbwd or fwd, got " + mode);
  const auto opts = torch::TensorOptions().dtype(dt);
  std::vector<torch::Tensor> leaves;
  for (double v : {0.5, 0.999, 0.001}) leaves.push_back(torch::tensor(v, opts).requires_grad_());
  const torch::Tensor &x = leaves[0], &w = leaves[1], &b = leaves[2];
  auto chain = [&] {
    torch::Tensor y = x;
    for (int64_t i = 0; i < n / 2; ++i) y = y * w + b;
    return y;
  };
  time_loop(
      [&] {
        if (mode == "fwd") {
          torch::NoGradGuard no_grad;
          chain();
        } else {
          for (torch::Tensor& t : leaves) t.mutable_grad() = torch::Tensor();
          chain().backward();
        }
      },
      min_time);
}

void info(int threads) {
  std::printf("{\"version\": \"%s\", \"threads\": %d, \"interop_threads\": %d}\n", TORCH_VERSION,
              threads, at::get_num_interop_threads());
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 2 && a[0] == "info") {
      at::set_num_threads(std::stoi(a[1]));
      info(at::get_num_threads());
    } else if (a.size() == 9 && a[0] == "attention") {
      at::set_num_threads(std::stoi(a[7]));
      attention(std::stoll(a[1]), std::stoll(a[2]), std::stoll(a[3]), std::stoll(a[4]),
                dtype_of(a[5]), a[6], std::stod(a[8]));
    } else if (a.size() == 4 && a[0] == "gpt") {
      at::set_num_threads(std::stoi(a[2]));
      gpt(dtype_of(a[1]), std::stod(a[3]));
    } else if (a.size() == 6 && a[0] == "op_chain") {
      at::set_num_threads(std::stoi(a[4]));
      op_chain(std::stoll(a[1]), dtype_of(a[2]), a[3], std::stod(a[5]));
    } else {
      std::fprintf(stderr, "usage: libtorch_side info THREADS | attention B T D H DTYPE "
                           "Fwd|FwdBwd THREADS MIN_TIME | gpt DTYPE THREADS MIN_TIME | op_chain "
                           "N DTYPE fwdbwd|fwd THREADS MIN_TIME\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch_side: %s\n", e.what());
    return 1;
  }
  return 0;
}
