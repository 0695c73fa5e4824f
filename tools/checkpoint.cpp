#include "tools/checkpoint.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/data/tokenizer.h>
#include <tapegrad/io/file_util.h>
#include <tapegrad/io/safetensors.h>

namespace tg::ckpt {

namespace {

using Json = nlohmann::json;

constexpr const char* kArchKey = "tapegrad.arch";

// The architecture the file records; the default one when it records none.
const Arch& arch_of_file(const std::map<std::string, std::string>& metadata,
                         const std::string& path) {
  const auto name = metadata.find(kArchKey);
  if (name == metadata.end()) return default_arch();
  const Arch* arch = find_arch(name->second);
  if (arch == nullptr)
    throw IoError(path + ": " + kArchKey + " '" + detail::printable(name->second) +
                  "' is not an architecture this program knows (" + arch_names() + ")");
  return *arch;
}

// Sizes a hand-edited file could make absurd (the config's fields that integer flags set: GPT's
// vocab_size, block_size, n_layer, n_head and n_embd): the model refuses the ones below 1, but
// not one whose tensors would not fit in memory before the shapes are even compared with the
// file's.
void check_sizes(const Arch& arch, const std::string& config, const std::string& path) {
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  const Json j = Json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;  // the architecture's parser says so
  for (const ModelFlag& f : arch.flags) {
    const auto it = j.find(f.key);
    if (!std::holds_alternative<int64_t TrainArgs::*>(f.member) || it == j.end() ||
        !it->is_number_integer())
      continue;
    const auto d = it->get<int64_t>();
    if (d < 1 || d > kMaxDim)
      throw IoError(path + ": tapegrad.config has a size " + std::to_string(d) +
                    " outside [1, 2^24]");
  }
}

// The model tapegrad.config describes, with initial weights of its own (a file's replace them).
std::unique_ptr<Model> build_model(const Arch& arch, const std::string& config,
                                   const std::string& path) {
  check_sizes(arch, config, path);
  Rng init_rng(0);
  try {
    return arch.build(config, init_rng);
  } catch (const ValueError& e) {
    throw IoError(path + ": tapegrad.config " + e.what());
  }
}

// tapegrad.vocab, which must have a character per token id of the model.
std::string checked_vocab(const std::string& vocab, const Model& model, const std::string& path) {
  int64_t chars = 0;
  try {
    chars = data::CharTokenizer::from_vocab(vocab).size();
  } catch (const ValueError& e) {
    throw IoError(path + ": tapegrad.vocab: " + e.what());
  }
  TrainArgs flags;
  set_model_flags(model, flags);
  if (chars != flags.vocab)
    throw IoError(path + ": tapegrad.vocab has " + std::to_string(chars) +
                  " characters but vocab_size is " + std::to_string(flags.vocab));
  return vocab;
}

int64_t parsed_step(const std::string& text, const std::string& path) {
  try {
    std::size_t used = 0;
    const int64_t step = std::stoll(text, &used);
    if (used != text.size() || step < 0) throw std::invalid_argument("step");
    return step;
  } catch (const std::exception&) {
    throw IoError(path + ": tapegrad.step '" + text + "' is not a count");
  }
}

}  // namespace

ModelFile read_model(const std::string& path) { return parse_model(detail::read_file(path), path); }

ModelFile parse_model(std::string_view bytes, const std::string& path) {
  SafeTensors st = parse_safetensors(bytes, path);
  return model_from(st.metadata, std::move(st.tensors), path);
}

ModelFile model_from(const std::map<std::string, std::string>& metadata, NamedTensors tensors,
                     const std::string& path) {
  const auto config = metadata.find("tapegrad.config");
  if (config == metadata.end())
    throw IoError(path + ": no tapegrad.config in the metadata (not written by tapegrad train)");
  ModelFile m;
  m.model = build_model(arch_of_file(metadata, path), config->second, path);
  if (const auto v = metadata.find("tapegrad.vocab"); v != metadata.end())
    m.vocab = checked_vocab(v->second, *m.model, path);
  if (const auto s = metadata.find("tapegrad.step"); s != metadata.end())
    m.step = parsed_step(s->second, path);
  m.tensors = std::move(tensors);
  return m;
}

void add_model(NamedTensors& tensors, std::map<std::string, std::string>& metadata,
               const Model& model, const std::optional<std::string>& vocab, int64_t step,
               std::string_view prefix) {
  for (const auto& [name, t] : model.module().state_dict())
    tensors.emplace_back(std::string(prefix) + name, t);
  metadata["tapegrad.config"] = model.config_json();
  metadata["tapegrad.step"] = std::to_string(step);
  if (&model.arch() != &default_arch()) metadata[kArchKey] = model.arch().name;
  if (vocab) metadata["tapegrad.vocab"] = *vocab;
}

NamedTensors model_tensors(const NamedTensors& tensors, std::string_view prefix) {
  NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

bool holds_model(const std::map<std::string, std::string>& metadata) {
  return metadata.count("tapegrad.config") > 0;
}

void load_weights(Model& model, NamedTensors tensors, const std::string& file) {
  const Dtype dtype = model.dtype();
  NamedTensors state;
  for (auto& [name, t] : tensors) {
    if (model.tied(name)) continue;
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
    model.module().load_state_dict(state);
  } catch (const ValueError& e) {
    throw ValueError(file + ": " + e.what() + " (the model flags give " + model.config_json() + ")");
  }
}

void write_model(const std::string& path, const Model& model,
                 const std::optional<std::string>& vocab, int64_t step) {
  NamedTensors tensors;
  std::map<std::string, std::string> meta = {{"format", "pt"}};
  add_model(tensors, meta, model, vocab, step);
  write_safetensors(path, tensors, meta);
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
