// Loads a sentence-transformers BERT folder: config.json, sentence_bert_config.json,
// 1_Pooling/config.json, tokenizer_config.json, vocab.txt and model.safetensors.
#include <boost/json.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "safetensors.h"
#include "tidegate/encoder/minilm.h"

namespace tidegate::encoder {

struct MiniLMModel::Storage {
  std::unique_ptr<SafeTensorsFile> file;
  std::vector<float> fused_qkv;                  // per layer: weight [3H,H] then bias [3H]
  std::vector<std::vector<float>> aligned_copies;  // tensors whose bytes are not float-aligned
};

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& dir, const std::string& why) {
  throw std::runtime_error("minilm model '" + dir + "': " + why);
}

std::optional<boost::json::object> read_json(const fs::path& path, const std::string& dir) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  boost::json::error_code ec;
  auto value = boost::json::parse(text.str(), ec);
  if (ec || !value.is_object()) fail(dir, path.filename().string() + " is not a JSON object");
  return std::move(value.as_object());
}

std::size_t get_size(const boost::json::object& obj, const char* key, std::size_t fallback, const std::string& dir) {
  const auto* v = obj.if_contains(key);
  if (v == nullptr) return fallback;
  if (!v->is_int64() || v->as_int64() <= 0) fail(dir, std::string("config.json: ") + key + " must be a positive integer");
  return static_cast<std::size_t>(v->as_int64());
}

MiniLMConfig parse_config(const std::string& dir) {
  const fs::path root(dir);
  auto config = read_json(root / "config.json", dir);
  if (!config) fail(dir, "config.json is missing");
  MiniLMConfig c;
  if (const auto* t = config->if_contains("model_type"); t && t->is_string() && t->as_string() != "bert") {
    fail(dir, "config.json: model_type must be \"bert\"");
  }
  if (const auto* act = config->if_contains("hidden_act"); act && (!act->is_string() || act->as_string() != "gelu")) {
    fail(dir, "config.json: hidden_act must be \"gelu\" (erf GELU)");
  }
  if (const auto* pe = config->if_contains("position_embedding_type");
      pe && (!pe->is_string() || pe->as_string() != "absolute")) {
    fail(dir, "config.json: position_embedding_type must be \"absolute\"");
  }
  c.vocab_size = get_size(*config, "vocab_size", c.vocab_size, dir);
  c.hidden = get_size(*config, "hidden_size", c.hidden, dir);
  c.layers = get_size(*config, "num_hidden_layers", c.layers, dir);
  c.heads = get_size(*config, "num_attention_heads", c.heads, dir);
  c.intermediate = get_size(*config, "intermediate_size", c.intermediate, dir);
  c.max_position = get_size(*config, "max_position_embeddings", c.max_position, dir);
  c.type_vocab_size = get_size(*config, "type_vocab_size", c.type_vocab_size, dir);
  if (const auto* eps = config->if_contains("layer_norm_eps"); eps && eps->is_number()) {
    c.layer_norm_eps = static_cast<float>(eps->to_number<double>());
  }
  if (c.hidden % c.heads != 0) fail(dir, "config.json: hidden_size is not a multiple of num_attention_heads");
  c.max_seq_length = c.max_position;
  if (auto st = read_json(root / "sentence_bert_config.json", dir)) {
    c.max_seq_length = std::min(c.max_position, get_size(*st, "max_seq_length", c.max_position, dir));
  }
  if (auto pooling = read_json(root / "1_Pooling" / "config.json", dir)) {
    const auto* mean = pooling->if_contains("pooling_mode_mean_tokens");
    if (mean == nullptr || !mean->is_bool() || !mean->as_bool()) {
      fail(dir, "1_Pooling/config.json: only mean pooling (pooling_mode_mean_tokens) is supported");
    }
  }
  return c;
}

}  // namespace

MiniLMModel::~MiniLMModel() = default;

std::shared_ptr<const MiniLMModel> MiniLMModel::load(const std::string& model_dir) {
  const fs::path root(model_dir);
  if (!fs::is_directory(root) || !fs::exists(root / "model.safetensors")) {
    fail(model_dir, "folder or model.safetensors not found; run scripts/setup.sh or point model_dir at a "
                    "sentence-transformers BERT folder");
  }
  std::shared_ptr<MiniLMModel> model(new MiniLMModel());
  model->dir_ = model_dir;
  model->storage_ = std::make_unique<Storage>();
  Storage& storage = *model->storage_;
  MiniLMWeights& w = model->weights_;
  w.config = parse_config(model_dir);
  const MiniLMConfig& c = w.config;

  WordPieceTokenizer::Options tok_options;
  if (auto tc = read_json(root / "tokenizer_config.json", model_dir)) {
    if (const auto* lower = tc->if_contains("do_lower_case"); lower && lower->is_bool()) {
      tok_options.lowercase = lower->as_bool();
    }
    // strip_accents: null means "follow lowercase", as in BERT.
    tok_options.strip_accents = tok_options.lowercase;
    if (const auto* strip = tc->if_contains("strip_accents"); strip && strip->is_bool()) {
      tok_options.strip_accents = strip->as_bool();
    }
    if (const auto* cjk = tc->if_contains("tokenize_chinese_chars"); cjk && cjk->is_bool()) {
      tok_options.split_cjk = cjk->as_bool();
    }
  }
  model->tokenizer_ = std::make_unique<WordPieceTokenizer>(
      WordPieceTokenizer::from_vocab_file((root / "vocab.txt").string(), tok_options));
  if (model->tokenizer_->vocab_size() != c.vocab_size) fail(model_dir, "vocab.txt size differs from config.json vocab_size");

  storage.file = std::make_unique<SafeTensorsFile>((root / "model.safetensors").string());
  const SafeTensorsFile& file = *storage.file;
  // Checkpoints saved from BertModel have bare names; from BertForX they carry "bert.".
  const std::string prefix = file.find("embeddings.word_embeddings.weight") ? "" : "bert.";
  auto tensor = [&](const std::string& name, std::vector<std::size_t> shape) -> const float* {
    const auto* t = file.find(prefix + name);
    if (t == nullptr) fail(model_dir, "tensor '" + prefix + name + "' is missing from model.safetensors");
    if (t->dtype != "F32") fail(model_dir, "tensor '" + name + "' is " + t->dtype + ", only F32 is supported");
    if (t->shape != shape) fail(model_dir, "tensor '" + name + "' has an unexpected shape");
    if (reinterpret_cast<std::uintptr_t>(t->data) % alignof(float) == 0) {
      return reinterpret_cast<const float*>(t->data);
    }
    auto& copy = storage.aligned_copies.emplace_back(t->bytes / sizeof(float));
    std::memcpy(copy.data(), t->data, t->bytes);
    return copy.data();
  };
  const std::size_t H = c.hidden, I = c.intermediate;
  w.word_embeddings = tensor("embeddings.word_embeddings.weight", {c.vocab_size, H});
  w.position_embeddings = tensor("embeddings.position_embeddings.weight", {c.max_position, H});
  w.token_type_embeddings = tensor("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H});
  w.embed_ln_gamma = tensor("embeddings.LayerNorm.weight", {H});
  w.embed_ln_beta = tensor("embeddings.LayerNorm.bias", {H});

  const std::size_t per_layer = 3 * H * H + 3 * H;
  storage.fused_qkv.resize(per_layer * c.layers);
  for (std::size_t l = 0; l < c.layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    MiniLMLayerWeights lw;
    float* fused = storage.fused_qkv.data() + l * per_layer;
    const char* parts[3] = {"query", "key", "value"};
    for (std::size_t k = 0; k < 3; ++k) {
      const std::string base = p + "attention.self." + parts[k];
      std::memcpy(fused + k * H * H, tensor(base + ".weight", {H, H}), H * H * sizeof(float));
      std::memcpy(fused + 3 * H * H + k * H, tensor(base + ".bias", {H}), H * sizeof(float));
    }
    lw.qkv_weight = fused;
    lw.qkv_bias = fused + 3 * H * H;
    lw.attn_out_weight = tensor(p + "attention.output.dense.weight", {H, H});
    lw.attn_out_bias = tensor(p + "attention.output.dense.bias", {H});
    lw.attn_ln_gamma = tensor(p + "attention.output.LayerNorm.weight", {H});
    lw.attn_ln_beta = tensor(p + "attention.output.LayerNorm.bias", {H});
    lw.ffn_in_weight = tensor(p + "intermediate.dense.weight", {I, H});
    lw.ffn_in_bias = tensor(p + "intermediate.dense.bias", {I});
    lw.ffn_out_weight = tensor(p + "output.dense.weight", {H, I});
    lw.ffn_out_bias = tensor(p + "output.dense.bias", {H});
    lw.ffn_ln_gamma = tensor(p + "output.LayerNorm.weight", {H});
    lw.ffn_ln_beta = tensor(p + "output.LayerNorm.bias", {H});
    w.layers.push_back(lw);
  }
  return model;
}

}  // namespace tidegate::encoder
