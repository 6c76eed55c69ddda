#pragma once
// Any OpenAI-compatible POST /v1/embeddings endpoint (TEI, vLLM, Ollama, OpenAI itself).
// Plain HTTP only: for a TLS endpoint put a local TLS-originating proxy (nginx, envoy) in front.
// Connections are kept alive between calls (the shared client, tidegate/common/http_client.h);
// embed() runs on worker threads, so the synchronous style costs no event-loop time.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "tidegate/encoder/embedder.h"

namespace tidegate::encoder {

struct OpenAIEmbedderOptions {
  // "http://host:port/v1" (the OpenAI base URL; "/embeddings" is appended) or a full URL that
  // already ends in "/embeddings".
  std::string url;
  std::string model;            // sent as "model"
  std::string api_key;          // optional: sent as "Authorization: Bearer <key>"
  std::size_t dim = 0;          // required: the dimension the endpoint returns (checked per reply)
  std::optional<std::size_t> request_dimensions;  // sent as "dimensions" (text-embedding-3-*)
  std::size_t max_batch = 64;   // texts per HTTP request; larger embed() calls are split
  std::chrono::milliseconds timeout{5000};  // whole request (connect+send+receive), also capped by the deadline
};

// Throws std::invalid_argument for an unusable URL (not http://, no host), an empty model or
// dim == 0. embed() throws std::runtime_error naming the URL on connection errors, timeouts,
// non-2xx statuses (with the start of the body), malformed JSON, a wrong count or dimension.
// Vectors come back L2-normalised whatever the server sends. name() is "openai".
std::unique_ptr<Embedder> make_openai_embedder(const OpenAIEmbedderOptions& options);

}  // namespace tidegate::encoder
