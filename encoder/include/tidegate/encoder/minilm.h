#pragma once
// sentence-transformers all-MiniLM-L6-v2 (any BERT encoder with mean pooling, really) run
// natively: WordPiece tokenizer, safetensors weights, OpenBLAS forward pass. The weights and the
// tokenizer are public so the CUDA encoder in kernels/ uploads exactly what the CPU path uses.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tidegate/encoder/embedder.h"

namespace tidegate::encoder {

// Where scripts/setup.sh unpacks the model, relative to the repository root.
inline constexpr const char* kDefaultMiniLMDir = "third_party/models/all-MiniLM-L6-v2";

// BERT uncased tokenizer with the semantics of HF tokenizers' BertNormalizer + BertPreTokenizer +
// WordPiece: drop control chars and U+FFFD, map whitespace to ' ', space out CJK ideographs,
// NFD and drop non-spacing marks, lowercase, split on whitespace and punctuation, then greedy
// longest-match word pieces ("##" continuation; a word with an unmatched rest, or longer than
// max_chars_per_word, becomes [UNK]). Invalid UTF-8 bytes read as U+FFFD and are dropped.
// Immutable after construction; safe to share between threads.
class WordPieceTokenizer final {
 public:
  struct Options {
    bool lowercase = true;
    bool strip_accents = true;
    bool split_cjk = true;
    std::size_t max_chars_per_word = 100;
  };

  // Reads vocab.txt (one token per line, id = line index). Throws std::runtime_error naming the
  // file when it cannot be read or lacks [CLS]/[SEP]/[UNK]/[PAD].
  static WordPieceTokenizer from_vocab_file(const std::string& path, const Options& options);
  WordPieceTokenizer(std::vector<std::string> vocab, const Options& options);

  // Word-piece ids without special tokens. Stops once `max_pieces` ids exist, so a huge prompt
  // costs no more than its prefix (truncation keeps a prefix, so the result is the same).
  std::vector<std::int32_t> tokenize(std::string_view text,
                                     std::size_t max_pieces = static_cast<std::size_t>(-1)) const;
  // [CLS] pieces [SEP], at most max_tokens ids in all (max_tokens >= 2), as sentence-transformers
  // truncates with max_seq_length.
  std::vector<std::int32_t> encode(std::string_view text, std::size_t max_tokens) const;
  // The normalised, pre-tokenised words (before word pieces); for tests and debugging.
  std::vector<std::string> basic_tokens(std::string_view text) const;

  std::int32_t cls_id() const { return cls_; }
  std::int32_t sep_id() const { return sep_; }
  std::int32_t pad_id() const { return pad_; }
  std::int32_t unk_id() const { return unk_; }
  std::size_t vocab_size() const { return vocab_.size(); }
  const std::string& token(std::int32_t id) const { return vocab_.at(static_cast<std::size_t>(id)); }
  std::optional<std::int32_t> id_of(std::string_view token) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Calls on_word for each pre-tokenised word until it returns false.
  void for_each_word(std::string_view text, const std::function<bool(std::string_view, std::size_t)>& on_word) const;
  // Appends the pieces of one word (UTF-8, `chars` code points) to out.
  void word_pieces(std::string_view word, std::size_t chars, std::vector<std::int32_t>& out) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, std::int32_t, Hash, std::equal_to<>> ids_;
  Options options_;
  std::int32_t cls_ = 0, sep_ = 0, pad_ = 0, unk_ = 0;
};

// Architecture, from config.json and sentence_bert_config.json.
struct MiniLMConfig {
  std::size_t vocab_size = 30522;
  std::size_t hidden = 384;
  std::size_t layers = 6;
  std::size_t heads = 12;
  std::size_t intermediate = 1536;
  std::size_t max_position = 512;
  std::size_t type_vocab_size = 2;
  std::size_t max_seq_length = 256;  // tokens including [CLS] and [SEP]
  float layer_norm_eps = 1e-12f;
};

// Row-major float32, PyTorch nn.Linear layout: a weight is [out_features, in_features] and
// y = x W^T + b. Pointers stay valid while the owning MiniLMModel lives.
struct MiniLMLayerWeights {
  const float* qkv_weight = nullptr;       // [3*hidden, hidden]: query rows, key rows, value rows
  const float* qkv_bias = nullptr;         // [3*hidden]
  const float* attn_out_weight = nullptr;  // [hidden, hidden]
  const float* attn_out_bias = nullptr;    // [hidden]
  const float* attn_ln_gamma = nullptr;    // [hidden]
  const float* attn_ln_beta = nullptr;     // [hidden]
  const float* ffn_in_weight = nullptr;    // [intermediate, hidden]
  const float* ffn_in_bias = nullptr;      // [intermediate]
  const float* ffn_out_weight = nullptr;   // [hidden, intermediate]
  const float* ffn_out_bias = nullptr;     // [hidden]
  const float* ffn_ln_gamma = nullptr;     // [hidden]
  const float* ffn_ln_beta = nullptr;      // [hidden]
};

struct MiniLMWeights {
  MiniLMConfig config;
  const float* word_embeddings = nullptr;        // [vocab_size, hidden]
  const float* position_embeddings = nullptr;    // [max_position, hidden]
  const float* token_type_embeddings = nullptr;  // [type_vocab_size, hidden]; row 0 is used
  const float* embed_ln_gamma = nullptr;         // [hidden]
  const float* embed_ln_beta = nullptr;          // [hidden]
  std::vector<MiniLMLayerWeights> layers;
};

// The loaded model folder: memory-mapped model.safetensors, the fused QKV weights, the tokenizer.
// Immutable; share one between all embedders (CPU and GPU) of a process.
class MiniLMModel final {
 public:
  // Throws std::runtime_error with the folder and the missing/bad file named, e.g. when the
  // folder is absent ("run scripts/setup.sh"), a tensor is missing or has the wrong shape, or the
  // pooling is not mean pooling.
  static std::shared_ptr<const MiniLMModel> load(const std::string& model_dir);
  ~MiniLMModel();

  const MiniLMWeights& weights() const { return weights_; }
  const WordPieceTokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Storage;
  MiniLMModel() = default;
  std::string dir_;
  std::unique_ptr<Storage> storage_;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
  MiniLMWeights weights_;
};

// Arithmetic of the dense layers. bf16 rounds weights and activations to bfloat16 and sums in
// fp32 (AVX512-BF16): about twice as fast for short prompts, cosine >= 0.9995 to the fp32
// result on the reference sentences. kAuto takes bf16 where the CPU has it.
enum class MiniLMPrecision { kAuto, kFp32, kBf16 };

struct MiniLMOptions {
  MiniLMPrecision precision = MiniLMPrecision::kAuto;
  // 0 keeps the model's max_seq_length (256); a smaller value truncates earlier.
  std::size_t max_seq_length = 0;
  // Parallelism comes from the caller's worker pool, so OpenBLAS should not spawn its own threads
  // inside each call. When > 0, openblas_set_num_threads(blas_threads) runs once at creation;
  // note that this setting is process-wide. 0 leaves OpenBLAS as configured (OPENBLAS_NUM_THREADS).
  int blas_threads = 1;
  // A larger embed() call runs as several forward passes of about this many tokens, which bounds
  // the per-call scratch memory (~14 KB per token) whatever the caller sends.
  std::size_t max_pass_tokens = 4096;
  // Threads one call's dense layers and attention heads may use (the caller plus
  // intra_op_threads - 1 helpers that spin briefly between layers, then sleep). 1 runs each call
  // on its caller alone: right when calls arrive together and keep every core busy; more cuts a
  // lone call's latency on a host with idle cores (2 halves it for prompts of 8 to 31 tokens,
  // bench/RESULTS.md). Results are identical either way.
  int intra_op_threads = 1;
  // bf16 products on the CPU's matrix tiles (Intel AMX) where it has them: the same arithmetic
  // as AVX512-BF16's dot instruction, summed in another order, at several times its rate for a
  // prompt's rows (bench/RESULTS.md). false keeps the dot instruction (for comparisons).
  bool matrix_tiles = true;
};

// name() is "minilm", dim() the hidden size. embed() is thread-safe (scratch is per call, or per
// thread for short prompts), throws std::runtime_error when the deadline has passed before or
// during the forward pass.
std::unique_ptr<Embedder> make_minilm_embedder(const std::string& model_dir, const MiniLMOptions& options = {});
std::unique_ptr<Embedder> make_minilm_embedder(std::shared_ptr<const MiniLMModel> model,
                                               const MiniLMOptions& options = {});

// Whether MiniLMPrecision::kBf16 can run on this CPU.
bool minilm_bf16_supported();
// Whether this CPU runs bf16 products on matrix tiles (MiniLMOptions::matrix_tiles).
bool minilm_matrix_tiles_supported();
// The dense arithmetic an embedder made with `options` runs on this CPU: "fp32" or "bf16", and
// whether on matrix tiles. Throws as make_minilm_embedder does for a precision the CPU lacks.
struct MiniLMArithmetic {
  const char* precision;
  bool matrix_tiles;
};
MiniLMArithmetic minilm_arithmetic(const MiniLMOptions& options);

// The forward pass on token ids ([CLS] ... [SEP] each), for tests and for parity checks of other
// backends: returns ids.size() * hidden floats, mean-pooled and L2-normalised.
std::vector<float> minilm_forward(const MiniLMWeights& weights, const std::vector<std::vector<std::int32_t>>& ids);

}  // namespace tidegate::encoder
