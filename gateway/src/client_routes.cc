// A client connection's requests other than inference: health, readiness, metrics, the model
// list and the routes the app adds (admin, dashboards) behind the admin key; and the context an
// inference request starts from (its id, the headers filters may read, who is asking).
#include <boost/json.hpp>

#include "active_request.h"
#include "client_connection.h"
#include "request_headers.h"

namespace tidegate::gateway {

void ClientConnection::handle_request() {
  const std::string_view target = req_.target();
  const std::string_view path = target.substr(0, target.find('?'));
  const auto method = req_.method();
  auto reply_json = [&](int status, const boost::json::value& v) {
    LocalReply r;
    r.status = status;
    r.body = boost::json::serialize(v);
    send_local(std::move(r));
  };
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/embeddings") {
    if (method != http::verb::post) return fail(Failure::kMethodNotAllowed, "use POST");
    return handle_inference(path == "/v1/chat/completions" ? Endpoint::kChat
                            : path == "/v1/completions"    ? Endpoint::kCompletions
                                                           : Endpoint::kEmbeddings);
  }
  for (const auto& route : impl_->routes) {
    if (path.rfind(route.prefix, 0) == 0 && (route.method == "*" || route.method == std::string(req_.method_string())))
      return handle_route(route);
  }
  if (method != http::verb::get && method != http::verb::head)
    return fail(Failure::kNotFound, "no route for " + std::string(req_.method_string()) + " " + std::string(path));
  if (path == "/healthz") return reply_json(200, {{"status", "ok"}});
  if (path == "/readyz") {
    boost::json::object models;
    bool all = true;
    for (const auto& m : config_->models) {
      auto pool = impl_->upstreams.find(m.name);
      const bool ready = pool && pool->ready();
      models[m.name] = ready;
      all = all && ready;
    }
    return reply_json(all ? 200 : 503, {{"ready", all}, {"models", models}});
  }
  if (path == "/metrics") {
    if (!admit_guarded(config_->metrics_need_admin_key, false)) return;
    impl_->stats.refresh(impl_->upstreams);
    LocalReply r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = impl_->stats.serialize();
    return send_local(std::move(r));
  }
  if (path == "/v1/models") {
    boost::json::array data;
    for (const auto& m : config_->models)
      data.push_back({{"id", m.name}, {"object", "model"}, {"created", 0}, {"owned_by", "tidegate"}});
    return reply_json(200, {{"object", "list"}, {"data", data}});
  }
  fail(Failure::kNotFound, "no route for GET " + std::string(path));
}

// The admin key, as a Bearer token or as a Basic password (any user name).
bool ClientConnection::has_admin_key() const {
  const auto auth = req_.header(http::field::authorization);
  const auto& key = config_->admin_key;
  return !key.empty() && (constant_time_equal(bearer_token(auth), key) || constant_time_equal(basic_password(auth), key));
}

// Admin routes with API keys but no admin_key are closed, not open: a deployment that turned
// on client keys and forgot the admin one must not hand every client the cache and scaler.
// Open mode (no keys at all) is only allowed on loopback or with `auth: none` (config.cc).
bool ClientConnection::admit_guarded(bool guarded, bool browser) {
  if (!guarded) return true;
  if (config_->admin_key.empty()) {
    if (config_->api_keys.empty()) return true;
    fail(Failure::kAdminDisabled, "admin routes are disabled: set admin_key in the config");
    return false;
  }
  if (has_admin_key()) return true;
  auto e = api_error(Failure::kInvalidAdminKey, "this route needs the admin key");
  if (browser) e.challenge = "Basic realm=\"tidegate\", charset=\"UTF-8\"";
  fail(e);
  return false;
}

void ClientConnection::handle_route(const Route& route) {
  const bool dashboard = route.access == RouteAccess::kDashboard;
  const bool guarded = route.access == RouteAccess::kAdmin || (dashboard && config_->dashboard_needs_admin_key);
  if (!admit_guarded(guarded, dashboard)) return;
  RouteRequest rr;
  rr.method = std::string(req_.method_string());
  rr.target = std::string(req_.target());
  const auto q = rr.target.find('?');
  rr.path = rr.target.substr(0, q);
  if (q != std::string::npos) rr.query = rr.target.substr(q + 1);
  req_.for_each_field([&rr](const ClientRequest::Field& f) { rr.headers[lower(f.name_string)] = std::string(f.value); });
  rr.body = req_.body();
  // The handler may answer from another thread: the worker holds this connection meanwhile
  // (Worker::hold), the callback only the way back.
  const auto hold = worker_.hold(shared_from_this());
  route.handler(rr, [door = worker_.door, worker = &worker_, hold](LocalReply reply) {
    door->post([worker, hold, reply = std::move(reply)]() mutable {
      if (const auto self = worker->let_go(hold)) self->send_local(std::move(reply));
    });
  });
}

// The request's context from the connection's view (its id, the headers filters may read, who
// is asking); the request itself takes it from there.
void ClientConnection::handle_inference(Endpoint endpoint) {
  auto ctx = std::make_shared<RequestContext>();
  ctx->start = start_;
  ctx->path = std::string(req_.target());
  const auto rid = req_.header("x-request-id");
  ctx->request_id = usable_request_id(rid) ? std::string(rid) : impl_->next_request_id();
  if (impl_->copy_request_headers) {
    req_.for_each_field([&ctx](const ClientRequest::Field& f) {
      if (f.name == http::field::authorization) return;  // secrets stay out of filters' hands
      ctx->request_headers[lower(f.name_string)] = std::string(f.value);
    });
  }
  // Held here too: an answer given inside start() (a bad body, a filter's reply, a failed
  // connect) may end the request before start() returns.
  auto request = std::make_shared<ActiveRequest>(*this, std::move(ctx));
  request_ = request;
  auto& c = request->ctx();
  // Authentication before parsing: unauthenticated clients learn nothing about models.
  if (!config_->api_keys.empty()) {
    const auto* key = impl_->authenticate(*config_, bearer_token(req_.header(http::field::authorization)));
    if (!key) {
      c.tenant = "unauthenticated";
      return fail(Failure::kInvalidApiKey, "invalid or missing API key (Authorization: Bearer ...)");
    }
    c.tenant = key->tenant;
    c.key_name = key->name;
    c.tags = key->tags;
  } else {
    c.tenant = "anonymous";
  }
  request->start(endpoint);
}

}  // namespace tidegate::gateway
