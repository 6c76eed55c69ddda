#include "session.h"

#include "tidegate/sim/text.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace tidegate::sim {
namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {
constexpr auto kIdleTimeout = std::chrono::seconds(300);
constexpr auto kWriteTimeout = std::chrono::seconds(30);
constexpr int kDieExitCode = 3;

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

void append_chunk(std::string& out, std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<std::size_t>(n)).append(data).append("\r\n");
}
}  // namespace

Session::Session(net::ip::tcp::socket socket, ServerState& state) : stream_(std::move(socket)), state_(state) {}

void Session::start() {
  boost::system::error_code ignored;
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  read_next();
}

void Session::read_next() {
  parser_.emplace();
  parser_->body_limit(state_.cfg->max_body_bytes);
  parser_->header_limit(64 * 1024);
  stream_.expires_after(kIdleTimeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](boost::system::error_code ec, std::size_t) { self->on_read(ec); });
}

void Session::on_read(boost::system::error_code ec) {
  if (ec == http::error::body_limit) return respond_error({413, "request body too large", "invalid_request_error", ""});
  if (ec) return close();  // end of stream, timeout, reset: nothing to answer
  const auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  chunked_ = req.version() >= 11;
  if (!chunked_) keep_alive_ = false;
  route();
}

void Session::route() {
  const auto& req = parser_->get();
  std::string_view target(req.target().data(), req.target().size());
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  const ServerConfig& cfg = *state_.cfg;

  if (target == "/health") {
    if (!get) return respond_error({405, "method not allowed", "invalid_request_error", ""});
    if (!state_.engine.loaded()) return respond_error({503, "model is loading", "ServiceUnavailableError", ""});
    if (state_.waking()) return respond_error({503, "model is waking up", "ServiceUnavailableError", ""});
    return respond(200, "application/json", "");  // asleep is healthy, as in vLLM
  }
  if (target == "/sleep" || target == "/wake_up") {
    if (!post) return respond_error({405, "method not allowed", "invalid_request_error", ""});
    if (target == "/sleep") {
      state_.asleep = true;
    } else if (state_.asleep.exchange(false)) {
      state_.awake_at = state_.engine.now() + cfg.wake_s;  // weights back from host memory
    }
    return respond(200, "application/json", "");
  }
  if (target == "/is_sleeping" && get)
    return respond(200, "application/json", std::string("{\"is_sleeping\":") + (state_.asleep ? "true" : "false") + "}");
  if (target == "/metrics" && get)
    return respond(200, "text/plain; version=0.0.4; charset=utf-8", state_.metrics.render(cfg.model, state_.engine.gauges(), state_.engine.prefix_cache_stats()));
  if (target == "/v1/models" && get) return respond(200, "application/json", models_body(cfg, state_.created));

  const bool chat = target == "/v1/chat/completions";
  const bool completions = target == "/v1/completions";
  const bool embeddings = target == "/v1/embeddings";
  if (!chat && !completions && !embeddings) return respond_error({404, "Not Found", "NotFoundError", ""});
  if (!post) return respond_error({405, "method not allowed", "invalid_request_error", ""});
  if (state_.asleep || state_.waking())
    return respond_error({503, state_.asleep ? "engine is asleep" : "engine is waking up", "ServiceUnavailableError", ""});

  // Fault injection counts generation and embedding POSTs only: probes and scrapes never kill it.
  const std::int64_t n = state_.posts_started.fetch_add(1) + 1;
  const bool dying = cfg.die_after > 0 && n >= cfg.die_after;
  if (!dying && cfg.fail_rate > 0) {
    const double u = static_cast<double>(mix64(cfg.seed ^ (static_cast<std::uint64_t>(n) * 0x9E3779B97F4A7C15ULL)) >> 11) * 0x1.0p-53;
    if (u < cfg.fail_rate) return respond_error({500, "simulated failure (--fail-rate)", "InternalServerError", ""});
  }
  if (embeddings) {
    if (dying) std::_Exit(kDieExitCode);
    std::string body;
    std::int64_t tokens = 0;
    if (auto e = embeddings_body(req.body(), cfg, body, tokens)) return respond_error(*e);
    state_.metrics.add_prompt_tokens(tokens);
    return respond(200, "application/json", body);
  }
  start_generation(chat ? Api::kChat : Api::kCompletions, dying);
}

void Session::start_generation(Api api, bool dying) {
  const ServerConfig& cfg = *state_.cfg;
  GenerationRequest req;
  if (auto e = parse_generation(parser_->get().body(), api, cfg, req)) return respond_error(*e);
  if (dying && !req.stream) std::_Exit(kDieExitCode);  // dies before the first byte
  Generation g;
  g.dying = dying;
  g.reply = plan_reply(req, cfg);
  const auto serial = state_.next_reply_id.fetch_add(1);
  g.id = (api == Api::kChat ? "chatcmpl-sim-" : "cmpl-sim-") + std::to_string(serial);
  if (req.stream) g.chunks.emplace(req, cfg, g.id, state_.created);
  g.req = std::move(req);
  g.submitted_at = state_.engine.now();
  state_.metrics.add_prompt_tokens(g.req.prompt_tokens);
  const auto n = static_cast<std::int32_t>(g.reply.tokens.size());
  const std::int64_t prompt = g.req.prompt_tokens;
  gen_ = std::move(g);
  // Later events are posted to this strand and run after this handler, so order holds.
  std::vector<Event> due_now;
  gen_->model_id = state_.engine.submit(prompt, n, gen_->req.prefix_blocks, shared_from_this(), due_now);
  if (!due_now.empty()) handle_events(due_now);
}

void Session::on_events(std::vector<Event> events) {
  net::post(stream_.get_executor(),
            [self = shared_from_this(), ev = std::move(events)]() { self->handle_events(ev); });
}

void Session::handle_events(const std::vector<Event>& events) {
  if (!gen_ || closed_) return;
  Generation& g = *gen_;
  std::string sse;
  for (const Event& e : events) {
    if (e.id != g.model_id) continue;  // a late batch of a cancelled generation
    switch (e.kind) {
      case EventKind::kRejected:
        gen_.reset();
        return respond_error({400, "prompt is longer than the KV cache can hold", "BadRequestError", "messages"});
      case EventKind::kFirstToken:
        state_.metrics.observe_ttft(e.t - g.submitted_at);
        g.reply.cached_tokens = e.cached_tokens;
        if (g.chunks && g.req.api == Api::kChat) sse += g.chunks->role_event();
        [[fallthrough]];
      case EventKind::kToken:
        if (g.chunks && e.tokens >= 1 && static_cast<std::size_t>(e.tokens) <= g.reply.tokens.size())
          sse += g.chunks->token_event(g.reply.tokens[static_cast<std::size_t>(e.tokens - 1)]);
        if (g.dying) {
          // --die-after on a stream: the client sees the head and a first token, then the
          // connection dies with the process, as a crashed inference server would.
          queue_stream_data(std::move(sse), true);
          return;
        }
        break;
      case EventKind::kFinished: {
        state_.metrics.add_generation_tokens(e.tokens);
        state_.metrics.count_request(true);
        // The model may have clamped the length to the KV capacity.
        if (static_cast<std::size_t>(e.tokens) < g.reply.tokens.size()) {
          g.reply.tokens.resize(static_cast<std::size_t>(e.tokens));
          g.reply.finish_reason = "length";
        }
        if (!g.chunks) {
          std::string body = full_response_body(g.req, *state_.cfg, g.id, state_.created, g.reply);
          gen_.reset();
          return respond(200, "application/json", body);
        }
        sse += g.chunks->finish_event(g.reply.finish_reason);
        if (g.req.include_usage) sse += g.chunks->usage_event(g.req.prompt_tokens, e.tokens, g.reply.cached_tokens);
        sse += ChunkWriter::done_event();
        queue_stream_data(std::move(sse), true);
        return;
      }
    }
  }
  if (!sse.empty()) queue_stream_data(std::move(sse), false);
}

void Session::queue_stream_data(std::string&& sse, bool last) {
  Generation& g = *gen_;
  if (!g.headers_sent) {
    g.headers_sent = true;
    pending_ += status_line(200);
    pending_ += "content-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n";
    pending_ += chunked_ ? "transfer-encoding: chunked\r\n" : "connection: close\r\n";
    pending_ += "\r\n";
  }
  if (chunked_) {
    if (!sse.empty()) append_chunk(pending_, sse);
    if (last && !g.dying) pending_ += "0\r\n\r\n";
  } else {
    pending_ += sse;
  }
  if (last) response_done_ = true;
  write_more();
}

void Session::respond(int status, std::string_view content_type, std::string_view body) {
  pending_ += status_line(status);
  pending_.append("content-type: ").append(content_type).append("\r\ncontent-length: ");
  pending_ += std::to_string(body.size());
  pending_ += keep_alive_ ? "\r\n\r\n" : "\r\nconnection: close\r\n\r\n";
  pending_ += body;
  response_done_ = true;
  write_more();
}

void Session::respond_error(const ApiError& e) {
  if (e.status == 413) keep_alive_ = false;  // the unread body is still on the wire
  respond(e.status, "application/json", error_body(e));
}

void Session::write_more() {
  if (writing_ || pending_.empty() || closed_) return;
  writing_ = true;
  in_flight_.swap(pending_);
  pending_.clear();
  stream_.expires_after(kWriteTimeout);
  net::async_write(stream_, net::buffer(in_flight_),
                   [self = shared_from_this()](boost::system::error_code ec, std::size_t) { self->on_write(ec); });
}

void Session::on_write(boost::system::error_code ec) {
  writing_ = false;
  in_flight_.clear();
  if (ec) {
    // The client went away: free its batch slot so that the model's load reflects reality.
    if (gen_) state_.engine.cancel(gen_->model_id);
    gen_.reset();
    return close();
  }
  if (!pending_.empty()) return write_more();
  if (!response_done_) {
    stream_.expires_never();  // waiting for the model, not for the peer
    return;
  }
  if (gen_ && gen_->dying) std::_Exit(kDieExitCode);
  response_done_ = false;
  gen_.reset();
  if (!keep_alive_) return close();
  read_next();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  stream_.close();
}

}  // namespace tidegate::sim
