// The pair verifier on the MiniLM encoder's forward pass: the verifier's own layers and
// token-type embeddings, MiniLM's word and position embeddings, the [CLS] vector through a
// linear head and a sigmoid. See pair_verifier.h for the input rule.
#include "tidegate/encoder/pair_verifier.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <stdexcept>

#include "intra_op.h"
#include "minilm_internal.h"
#include "safetensors.h"

namespace tidegate::encoder {

struct PairVerifier::Impl {
  std::deque<std::vector<float>> owned;  // fp32 copies of the verifier's tensors (stable addresses)
  MiniLMWeights weights;
  std::vector<PackedMiniLMLayer> packed;
  const float* head_weight = nullptr;  // [hidden]
  float head_bias = 0;
  std::unique_ptr<IntraOpPool> pool;
};

namespace {

constexpr const char* kFormat = "tidegate-pair-verifier-1";

std::size_t parse_count(const std::string& text, const std::string& what, const std::string& path) {
  std::size_t pos = 0;
  unsigned long v = 0;
  try {
    v = std::stoul(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (text.empty() || pos != text.size() || v == 0)
    throw std::runtime_error("pair verifier '" + path + "': metadata " + what + " must be a positive integer, got '" +
                             text + "'");
  return v;
}

}  // namespace

PairVerifier::~PairVerifier() = default;

std::unique_ptr<PairVerifier> PairVerifier::load(const std::string& dir, std::shared_ptr<const MiniLMModel> base,
                                                 const PairVerifierOptions& options) {
  if (!base) throw std::invalid_argument("pair verifier: no base MiniLM model");
  const std::string path = (std::filesystem::path(dir) / kWeightsFile).string();
  auto fail = [&](const std::string& why) -> std::runtime_error {
    return std::runtime_error("pair verifier '" + path + "': " + why);
  };
  if (!std::filesystem::is_regular_file(path))
    throw fail("file not found (train it with cache/verifier/train_verifier.py, or point verifier.dir at its folder)");
  if (options.intra_op_threads < 1) throw std::invalid_argument("pair verifier: intra_op_threads must be at least 1");
  std::unique_ptr<SafeTensorsFile> file;
  try {
    file = std::make_unique<SafeTensorsFile>(path);
  } catch (const std::exception& e) {
    throw fail(std::string("unreadable: ") + e.what());
  }
  if (file->metadata("format") != kFormat)
    throw fail("metadata format is '" + file->metadata("format") + "', expected '" + kFormat + "'");
  const std::size_t layers = parse_count(file->metadata("layers"), "layers", path);
  const std::size_t max_tokens = parse_count(file->metadata("max_tokens"), "max_tokens", path);

  std::unique_ptr<PairVerifier> v(new PairVerifier());
  v->impl_ = std::make_unique<Impl>();
  v->base_ = std::move(base);
  v->path_ = path;
  v->max_tokens_ = max_tokens;
  Impl& impl = *v->impl_;
  const MiniLMWeights& bw = v->base_->weights();
  MiniLMConfig c = bw.config;
  c.layers = layers;
  if (max_tokens < 3 || max_tokens > c.max_position)
    throw fail("max_tokens " + std::to_string(max_tokens) + " is outside 3.." + std::to_string(c.max_position));
  const std::size_t H = c.hidden, I = c.intermediate;

  // Every tensor as fp32, whatever it was stored as (bf16: the upper half of an fp32).
  auto tensor = [&](const std::string& name, const std::vector<std::size_t>& shape) -> std::vector<float>& {
    const auto* t = file->find(name);
    if (t == nullptr) throw fail("tensor '" + name + "' is missing");
    if (t->shape != shape) throw fail("tensor '" + name + "' has an unexpected shape");
    std::size_t count = 1;
    for (auto d : shape) count *= d;
    auto& out = impl.owned.emplace_back(count);
    if (t->dtype == "F32") {
      std::memcpy(out.data(), t->data, count * sizeof(float));
    } else if (t->dtype == "BF16") {
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t half;
        std::memcpy(&half, t->data + 2 * i, 2);
        const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    } else {
      throw fail("tensor '" + name + "' is " + t->dtype + ", expected BF16 or F32");
    }
    for (float x : out)
      if (!std::isfinite(x)) throw fail("tensor '" + name + "' holds a value that is not finite");
    return out;
  };

  MiniLMWeights& w = impl.weights;
  w.config = c;
  w.word_embeddings = bw.word_embeddings;
  w.position_embeddings = bw.position_embeddings;
  w.token_type_embeddings = tensor("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}).data();
  w.embed_ln_gamma = tensor("embeddings.LayerNorm.weight", {H}).data();
  w.embed_ln_beta = tensor("embeddings.LayerNorm.bias", {H}).data();
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    auto& fused = impl.owned.emplace_back(3 * H * H + 3 * H);
    const char* parts[3] = {"query", "key", "value"};
    for (std::size_t k = 0; k < 3; ++k) {
      const std::string name = p + "attention.self." + parts[k];
      const auto& wt = tensor(name + ".weight", {H, H});
      const auto& bs = tensor(name + ".bias", {H});
      std::copy(wt.begin(), wt.end(), fused.begin() + static_cast<std::ptrdiff_t>(k * H * H));
      std::copy(bs.begin(), bs.end(), fused.begin() + static_cast<std::ptrdiff_t>(3 * H * H + k * H));
    }
    MiniLMLayerWeights lw;
    lw.qkv_weight = fused.data();
    lw.qkv_bias = fused.data() + 3 * H * H;
    lw.attn_out_weight = tensor(p + "attention.output.dense.weight", {H, H}).data();
    lw.attn_out_bias = tensor(p + "attention.output.dense.bias", {H}).data();
    lw.attn_ln_gamma = tensor(p + "attention.output.LayerNorm.weight", {H}).data();
    lw.attn_ln_beta = tensor(p + "attention.output.LayerNorm.bias", {H}).data();
    lw.ffn_in_weight = tensor(p + "intermediate.dense.weight", {I, H}).data();
    lw.ffn_in_bias = tensor(p + "intermediate.dense.bias", {I}).data();
    lw.ffn_out_weight = tensor(p + "output.dense.weight", {H, I}).data();
    lw.ffn_out_bias = tensor(p + "output.dense.bias", {H}).data();
    lw.ffn_ln_gamma = tensor(p + "output.LayerNorm.weight", {H}).data();
    lw.ffn_ln_beta = tensor(p + "output.LayerNorm.bias", {H}).data();
    w.layers.push_back(lw);
  }
  impl.head_weight = tensor("classifier.weight", {1, H}).data();
  impl.head_bias = tensor("classifier.bias", {1})[0];

  const DenseMath math = dense_math_for(options.precision, options.matrix_tiles, "pair verifier");
  impl.packed = pack_minilm(w, math);
  if (options.intra_op_threads > 1)
    impl.pool = std::make_unique<IntraOpPool>(static_cast<std::size_t>(options.intra_op_threads - 1));
  return v;
}

std::size_t PairVerifier::layers() const { return impl_->weights.layers.size(); }
// What the packed layers run (every layer is packed alike, and a verifier has at least one).
const char* PairVerifier::precision() const {
  return impl_->packed.front().qkv.math() == DenseMath::kFp32 ? "fp32" : "bf16";
}
bool PairVerifier::matrix_tiles() const { return impl_->packed.front().qkv.math() == DenseMath::kBf16Tiles; }
const MiniLMWeights& PairVerifier::weights() const { return impl_->weights; }

float PairVerifier::probability_from_cls(const float* cls) const {
  double logit = impl_->head_bias;
  for (std::size_t h = 0; h < impl_->weights.config.hidden; ++h)
    logit += static_cast<double>(cls[h]) * impl_->head_weight[h];
  return static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
}

PairTokens PairVerifier::encode(std::string_view a, std::string_view b) const {
  const auto& tok = base_->tokenizer();
  // Longest-first cutting only ever drops pieces from the ends, and no side keeps more than the
  // budget, so tokenising each side up to the budget gives the same result as tokenising all.
  const std::size_t budget = max_tokens_ - 3;
  auto pa = tok.tokenize(a, budget);
  auto pb = tok.tokenize(b, budget);
  while (pa.size() + pb.size() > budget) {
    if (pa.size() > pb.size())
      pa.pop_back();
    else
      pb.pop_back();
  }
  PairTokens t;
  t.ids.reserve(pa.size() + pb.size() + 3);
  t.ids.push_back(tok.cls_id());
  t.ids.insert(t.ids.end(), pa.begin(), pa.end());
  t.ids.push_back(tok.sep_id());
  t.ids.insert(t.ids.end(), pb.begin(), pb.end());
  t.ids.push_back(tok.sep_id());
  t.types.assign(t.ids.size(), 1);
  std::fill(t.types.begin(), t.types.begin() + static_cast<std::ptrdiff_t>(pa.size() + 2), 0);
  return t;
}

std::vector<float> PairVerifier::verify(std::string_view query, const std::vector<std::string>& candidates,
                                        std::chrono::steady_clock::time_point deadline) const {
  std::vector<PairTokens> pairs;
  pairs.reserve(candidates.size());
  for (const auto& c : candidates) pairs.push_back(encode(query, c));
  return score(pairs, deadline);
}

std::vector<float> PairVerifier::score(const std::vector<PairTokens>& pairs,
                                       std::chrono::steady_clock::time_point deadline) const {
  if (pairs.empty()) return {};
  auto check = [deadline] {
    if (std::chrono::steady_clock::now() >= deadline) throw std::runtime_error("pair verifier: deadline exceeded");
  };
  check();
  std::vector<std::vector<std::int32_t>> ids, types;
  ids.reserve(pairs.size());
  types.reserve(pairs.size());
  for (const auto& p : pairs) {
    if (p.ids.size() > max_tokens_) throw std::invalid_argument("pair verifier: pair longer than max_tokens");
    ids.push_back(p.ids);
    types.push_back(p.types);
  }
  const auto cls = bert_forward(impl_->weights, &impl_->packed, ids, &types, BertPooling::kFirstToken, check,
                                impl_->pool.get());
  const std::size_t H = impl_->weights.config.hidden;
  std::vector<float> out(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) out[i] = probability_from_cls(cls.data() + i * H);
  return out;
}

}  // namespace tidegate::encoder
