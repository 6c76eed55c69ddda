#pragma once
// Shared between the encoder's translation units; not part of the public API.
#include <functional>
#include <vector>

#include "packed_linear.h"

#include "tidegate/encoder/minilm.h"

namespace tidegate::encoder {

// The CPU embedder's private copy of the dense weights, packed for few-row products.
struct PackedMiniLMLayer {
  PackedLinear qkv, attn_out, ffn_in, ffn_out;
};
// The dense arithmetic a precision asks for on this CPU (kAuto: bf16 where it runs, else fp32;
// bf16 on matrix tiles where they run and `matrix_tiles` allows); throws std::invalid_argument,
// naming `who`, for a precision this CPU cannot run.
DenseMath dense_math_for(MiniLMPrecision precision, bool matrix_tiles, const char* who);
std::vector<PackedMiniLMLayer> pack_minilm(const MiniLMWeights& w, DenseMath math = DenseMath::kFp32);

// minilm_forward with packed weights (null: OpenBLAS sgemm for every dense layer) and a hook called before each
// layer (the embedder checks its deadline there).
// `pool` (optional) splits the packed dense layers across its threads.
std::vector<float> minilm_forward_checked(const MiniLMWeights& w, const std::vector<PackedMiniLMLayer>* packed,
                                          const std::vector<std::vector<std::int32_t>>& ids,
                                          const std::function<void()>& checkpoint, IntraOpPool* pool = nullptr);

// What a forward pass returns for each sequence: the mean of its token vectors, L2-normalised
// (sentence embeddings), or the first token's ([CLS]) final hidden state, as it is (the pair
// verifier's classifier input). kFirstToken computes only the [CLS] rows in the last layer;
// kFirstTokenWholeLayer computes every row there, as the model is written: the reference the
// pruned pass is tested against.
enum class BertPooling { kMeanL2, kFirstToken, kFirstTokenWholeLayer };

// The forward pass behind both: `token_types` (null: type 0 everywhere) gives each token's
// segment, as BERT's token-type embeddings read it; each row must have its sequence's length.
std::vector<float> bert_forward(const MiniLMWeights& w, const std::vector<PackedMiniLMLayer>* packed,
                                const std::vector<std::vector<std::int32_t>>& ids,
                                const std::vector<std::vector<std::int32_t>>* token_types, BertPooling pooling,
                                const std::function<void()>& checkpoint, IntraOpPool* pool = nullptr);

// Scales v to unit length; an all-zero vector stays zero and the result is false.
bool l2_normalize(float* v, std::size_t dim);

}  // namespace tidegate::encoder
