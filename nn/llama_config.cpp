#include <tapegrad/nn/llama_config.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include <tapegrad/io/file_util.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/config_json.h>

namespace tg::nn {

namespace {

using Json = nlohmann::json;

// torch_dtype as Hugging Face spells the floating dtypes, in Dtype's order (as kDtypeNames).
constexpr const char* kTorchDtypeNames[] = {"float32", "float64"};

// Every field of LlamaConfig by its config.json key.
std::vector<ConfigField> config_fields(LlamaConfig& c) {
  return {{"vocab_size", &c.vocab_size},
          {"hidden_size", &c.hidden_size},
          {"intermediate_size", &c.intermediate_size},
          {"num_hidden_layers", &c.num_hidden_layers},
          {"num_attention_heads", &c.num_attention_heads},
          {"num_key_value_heads", &c.num_key_value_heads},
          {"max_position_embeddings", &c.max_position_embeddings},
          {"rms_norm_eps", &c.rms_norm_eps},
          {"rope_theta", &c.rope_theta},
          {"tie_word_embeddings", &c.tie_word_embeddings},
          {"dtype", enum_ref(c.dtype, kDtypeNames)}};
}

void write_text(const std::string& path, const std::string& text) {
  detail::TempFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace

std::string llama_config_to_json(const LlamaConfig& config) {
  if (!is_floating(config.dtype)) throw ValueError("LlamaConfig: dtype must be float32 or float64");
  LlamaConfig c = config;  // the field list refers to members it may write
  Json j = Json::parse(config_to_json(config_fields(c)));
  j["architectures"] = Json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["torch_dtype"] = kTorchDtypeNames[static_cast<int>(c.dtype)];
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  return j.dump();
}

LlamaConfig llama_config_from_json(const std::string& json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw ValueError("is not a JSON object");
  if (!j.contains("dtype") && j.contains("torch_dtype") && j["torch_dtype"].is_string()) {
    const std::string name = j["torch_dtype"].get<std::string>();
    const std::optional<std::size_t> i = find_name(kTorchDtypeNames, name);
    if (!i)
      throw ValueError("has torch_dtype '" + name + "' (" + one_of(kTorchDtypeNames) + ")");
    j["dtype"] = kDtypeNames[*i];
  }
  if ((!j.contains("num_key_value_heads") || j["num_key_value_heads"].is_null()) &&
      j.contains("num_attention_heads"))
    j["num_key_value_heads"] = j["num_attention_heads"];
  const LlamaConfig defaults;  // Hugging Face's for the keys a config.json may leave out
  if (!j.contains("rms_norm_eps")) j["rms_norm_eps"] = defaults.rms_norm_eps;
  if (!j.contains("rope_theta")) j["rope_theta"] = defaults.rope_theta;
  if (!j.contains("tie_word_embeddings")) j["tie_word_embeddings"] = defaults.tie_word_embeddings;
  LlamaConfig c;
  config_from_json(j.dump(), config_fields(c));
  return c;
}

void save_pretrained(const Llama& model, const std::string& dir) {
  std::error_code err;
  std::filesystem::create_directories(dir, err);
  if (err) throw IoError(dir + ": cannot create the folder: " + err.message());
  const std::string folder = std::filesystem::path(dir).string() + "/";
  write_text(folder + "config.json", llama_config_to_json(model.config()) + "\n");
  write_safetensors(folder + "model.safetensors", model.state_dict(), {{"format", "pt"}});
}

std::unique_ptr<Llama> from_pretrained(const std::string& dir) {
  const std::string folder = std::filesystem::path(dir).string() + "/";
  LlamaConfig config;
  try {
    config = llama_config_from_json(detail::read_file(folder + "config.json"));
  } catch (const ValueError& e) {
    throw ValueError(folder + "config.json " + e.what());  // "... has no integer field"
  }
  Rng unused(0);  // every weight is overwritten below
  std::unique_ptr<Llama> model;
  try {
    model = std::make_unique<Llama>(config, unused);
  } catch (const ValueError& e) {
    throw ValueError(folder + "config.json: " + e.what());
  }
  NamedTensors state = read_safetensors(folder + "model.safetensors").tensors;
  if (config.tie_word_embeddings)  // Hugging Face may keep the tied head under its own name too
    std::erase_if(state, [](const auto& entry) { return entry.first == "lm_head.weight"; });
  try {
    model->load_state_dict(state);
  } catch (const ValueError& e) {
    throw ValueError(folder + "model.safetensors: " + e.what());
  }
  return model;
}

}  // namespace tg::nn
