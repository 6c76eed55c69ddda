#pragma once
// What an engine's non-2xx answer means for routing, and the OpenAI error object it becomes.
//
// The rule (README "Upstream errors"): an answer is held against a replica, and the request
// retried elsewhere, only when the replica rather than the request is what failed.
//   - 4xx: the request's own fault (bad input, too long, unknown model, rate limit). Relayed.
//   - 501: the engine does not implement what was asked (llama.cpp answers 501 to
//     /v1/embeddings on a chat model): every replica of the model would answer the same.
//   - 502, 503, 504, and 5xx without an engine error object (a crash page, a proxy's HTML,
//     an empty body): the replica's. Retried elsewhere, counted towards ejection.
//   - other 5xx with an engine error object (`{"error":{...}}`, `{"object":"error",...}`,
//     TGI's `{"error":"..."}`): unclear. The engine's handler ran and refused, which is what
//     it does both for input it cannot take (llama.cpp answers 500 to an image sent to a text
//     model) and for its own trouble. The session asks a second replica, once: the same
//     answer there makes it the request's (relayed, nobody charged); a served answer there
//     makes it the first replica's. With no second replica free, it is relayed and nobody is
//     charged: a replica whose engine has died fails its health probe instead.
// Retrying request-caused errors on every replica, and counting each as a replica failure,
// used to let one tenant's bad input eject every replica for everyone.
#include <string_view>

#include "openai.h"

namespace tidegate::gateway {

enum class UpstreamFault {
  kNone,     // 1xx-3xx: an answer
  kRequest,  // the request's fault: relay, no retry, not held against the replica
  kReplica,  // the replica's fault: retry elsewhere, counts towards ejection
  kUnclear,  // an engine error object with a 5xx: a second replica's answer decides
};

UpstreamFault classify_upstream_answer(int status, std::string_view body);
// 502, 503, 504: the replica's whatever the body says, so known from the head alone.
constexpr bool is_replica_status(int status) { return status == 502 || status == 503 || status == 504; }

// Engines' error bodies, normalised to OpenAI's shape: the original message kept, `type` from
// the status as OpenAI uses it, `code` a string (context_length_exceeded for prompts over
// the context, whatever the engine's wording; the engine's own string code when it had one;
// else one named after the status). Bodies that are not an engine error object get a
// message naming the status and a prefix of the body.
ApiError normalize_engine_error(int status, std::string_view body);

}  // namespace tidegate::gateway
