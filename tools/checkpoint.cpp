#include "tools/checkpoint.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "data/tokenizer.h"
#include "io/file_util.h"
#include "io/safetensors.h"

namespace tg::ckpt {

namespace {

using Json = nlohmann::json;

const char* gelu_name(nn::GeluKind g) { return g == nn::GeluKind::tanh ? "tanh" : "erf"; }

// The field `key` of the config object as T; throws IoError naming the file and the field.
template <class T>
T field(const Json& j, const char* key, const std::string& file) {
  const auto it = j.find(key);
  const bool ok = it != j.end() && (std::is_same_v<T, bool>          ? it->is_boolean()
                                    : std::is_same_v<T, std::string> ? it->is_string()
                                    : std::is_integral_v<T>          ? it->is_number_integer()
                                                                     : it->is_number());
  if (!ok)
    throw IoError(file + ": tapegrad.config has no " +
                  (std::is_same_v<T, bool>          ? "boolean"
                   : std::is_same_v<T, std::string> ? "string"
                   : std::is_integral_v<T>          ? "integer"
                                                    : "number") +
                  " field '" + key + "'");
  return it->get<T>();
}

}  // namespace

std::string config_json(const nn::GPTConfig& c) {
  Json j;
  j["vocab_size"] = c.vocab_size;
  j["block_size"] = c.block_size;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_embd"] = c.n_embd;
  j["bias"] = c.bias;
  j["gelu"] = gelu_name(c.gelu);
  j["attention_only"] = c.attention_only;
  j["dropout"] = c.dropout;
  j["dtype"] = c.dtype == Dtype::f32 ? "f32" : "f64";
  return j.dump();
}

nn::GPTConfig parse_config(const std::string& text, const std::string& file) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw IoError(file + ": tapegrad.config is not a JSON object");
  nn::GPTConfig c;
  c.vocab_size = field<int64_t>(j, "vocab_size", file);
  c.block_size = field<int64_t>(j, "block_size", file);
  c.n_layer = field<int64_t>(j, "n_layer", file);
  c.n_head = field<int64_t>(j, "n_head", file);
  c.n_embd = field<int64_t>(j, "n_embd", file);
  c.bias = field<bool>(j, "bias", file);
  const std::string gelu = field<std::string>(j, "gelu", file);
  const std::string dtype = field<std::string>(j, "dtype", file);
  c.attention_only = field<bool>(j, "attention_only", file);
  c.dropout = field<double>(j, "dropout", file);
  if (gelu != "tanh" && gelu != "erf")
    throw IoError(file + ": tapegrad.config has gelu '" + gelu + "' (tanh or erf)");
  if (dtype != "f32" && dtype != "f64")
    throw IoError(file + ": tapegrad.config has dtype '" + dtype + "' (f32 or f64)");
  c.gelu = gelu == "tanh" ? nn::GeluKind::tanh : nn::GeluKind::erf;
  c.dtype = dtype == "f32" ? Dtype::f32 : Dtype::f64;
  // Sizes a hand-edited file could make absurd: GPT itself refuses the rest (< 1, n_head not
  // dividing n_embd, dropout outside [0, 1)), but not a size whose tensors would not fit in
  // memory before the shapes are even compared with the file's.
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  for (const int64_t d : {c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd})
    if (d < 1 || d > kMaxDim)
      throw IoError(file + ": tapegrad.config has a size " + std::to_string(d) +
                    " outside [1, 2^24]");
  if (c.n_embd % c.n_head != 0 || !(c.dropout >= 0 && c.dropout < 1))
    throw IoError(file + ": tapegrad.config " + text + " is not a valid GPT config");
  return c;
}

ModelFile read_model(const std::string& path) { return parse_model(detail::read_file(path), path); }

ModelFile parse_model(std::string_view bytes, const std::string& path) {
  SafeTensors st = parse_safetensors(bytes, path);
  ModelFile m;
  const auto config = st.metadata.find("tapegrad.config");
  if (config == st.metadata.end())
    throw IoError(path + ": no tapegrad.config in the metadata (not written by tapegrad train)");
  m.config = parse_config(config->second, path);
  if (const auto v = st.metadata.find("tapegrad.vocab"); v != st.metadata.end()) {
    int64_t chars = 0;
    try {
      chars = data::CharTokenizer::from_vocab(v->second).size();
    } catch (const ValueError& e) {
      throw IoError(path + ": tapegrad.vocab: " + e.what());
    }
    if (chars != m.config.vocab_size)
      throw IoError(path + ": tapegrad.vocab has " + std::to_string(chars) +
                    " characters but vocab_size is " + std::to_string(m.config.vocab_size));
    m.vocab = v->second;
  }
  if (const auto s = st.metadata.find("tapegrad.step"); s != st.metadata.end()) {
    try {
      std::size_t used = 0;
      m.step = std::stoll(s->second, &used);
      if (used != s->second.size() || m.step < 0) throw std::invalid_argument("step");
    } catch (const std::exception&) {
      throw IoError(path + ": tapegrad.step '" + s->second + "' is not a count");
    }
  }
  m.tensors = std::move(st.tensors);
  return m;
}

void load_weights(nn::GPT& model, NamedTensors tensors, const std::string& file) {
  const Dtype dtype = model.config().dtype;
  NamedTensors state;
  for (auto& [name, t] : tensors) {
    if (name == "lm_head.weight") continue;  // tied to transformer.wte.weight in this model
    if (t.dtype() == Dtype::i64)
      throw ValueError(file + ": tensor '" + detail::printable(name) + "' is int64; parameters are float");
    if (t.dtype() != dtype) t = t.to(dtype);
    const std::vector<double> v = t.to_vector();
    for (std::size_t k = 0; k < v.size(); ++k)
      if (!std::isfinite(v[k]))
        throw ValueError(file + ": tensor '" + detail::printable(name) + "' holds a non-finite value at flat index " +
                         std::to_string(k) + (t.dtype() == Dtype::f32 ? " (in float32)" : ""));
    state.emplace_back(name, t);
  }
  try {
    model.load_state_dict(state);
  } catch (const ValueError& e) {
    throw ValueError(file + ": " + e.what() + " (the model flags give " +
                     config_json(model.config()) + ")");
  }
}

void write_model(const std::string& path, const nn::GPT& model,
                 const std::optional<std::string>& vocab, int64_t step) {
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"tapegrad.config", config_json(model.config())},
                                             {"tapegrad.step", std::to_string(step)}};
  if (vocab) meta["tapegrad.vocab"] = *vocab;
  write_safetensors(path, model.state_dict(), meta);
}

Tensor rng_state(Rng& rng) {
  std::ostringstream text;
  text << rng.engine();
  std::istringstream words(text.str());
  std::vector<int64_t> values;
  for (unsigned long long w; words >> w;) {
    int64_t v;
    std::memcpy(&v, &w, sizeof v);  // the bits of the unsigned word, stored as I64
    values.push_back(v);
  }
  return from_indices(values, {static_cast<int64_t>(values.size())});
}

void set_rng_state(Rng& rng, const Tensor& state, const std::string& what) {
  if (state.dtype() != Dtype::i64 || state.rank() != 1)
    throw IoError(what + ": a generator state must be a 1-D int64 tensor, got " +
                  dtype_name(state.dtype()) + " " + state.shape().str());
  std::ostringstream text;
  const int64_t* p = state.data<int64_t>();
  for (int64_t i = 0; i < state.numel(); ++i) {
    unsigned long long w;
    std::memcpy(&w, &p[i], sizeof w);
    text << (i ? " " : "") << w;
  }
  std::istringstream in(text.str());
  std::mt19937_64 engine;
  in >> engine;
  std::string rest;
  if (in.fail() || (in >> rest))
    throw IoError(what + ": not the state of a std::mt19937_64 generator (" +
                  std::to_string(state.numel()) + " words)");
  rng.engine() = engine;
}

const Tensor& get_tensor(const NamedTensors& tensors, const std::string& name,
                         const std::string& file) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw IoError(file + ": no tensor '" + detail::printable(name) + "'");
}

int64_t get_count(const NamedTensors& tensors, const std::string& name, const std::string& file) {
  const Tensor& t = get_tensor(tensors, name, file);
  if (t.dtype() != Dtype::i64 || t.rank() != 0 || t.data<int64_t>()[0] < 0)
    throw IoError(file + ": tensor '" + detail::printable(name) + "' must be a non-negative int64 scalar, got " +
                  dtype_name(t.dtype()) + " " + t.shape().str());
  return t.data<int64_t>()[0];
}

}  // namespace tg::ckpt
