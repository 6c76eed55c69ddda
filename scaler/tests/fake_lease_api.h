#pragma once
// The fake API server's coordination.k8s.io/v1 Lease part, as the documented semantics have
// it: GET 404 when missing, POST 409 AlreadyExists, PUT 409 Conflict when
// metadata.resourceVersion is not the stored one, every write a new resourceVersion. Each
// successful write is logged with the server's clock, so tests can time takeovers.
#include <boost/json.hpp>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tidegate/testing/fake_http_server.h"

namespace tidegate::scaler {

class FakeLeaseApi final {
 public:
  struct Write {
    std::string holder;
    double t = 0;  // steady clock, seconds
    int transitions = 0;
  };

  explicit FakeLeaseApi(std::string ns = "ns1") : ns_(std::move(ns)) {}

  // The lease routes; nullopt for any other path.
  std::optional<testing::FakeResponse> handle(const testing::FakeRequest& r) {
    namespace json = boost::json;
    const std::string base = "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases";
    if (r.target.rfind(base, 0) != 0) return std::nullopt;
    const std::string name = r.target.size() > base.size() + 1 ? r.target.substr(base.size() + 1) : "";
    std::lock_guard lock(mu_);
    auto status = [](int code, const char* reason) {
      return testing::FakeResponse{code, R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":")" +
                                             std::string(reason) + R"(","code":)" + std::to_string(code) + "}"};
    };
    if (r.method == "GET") {
      if (!lease_ || name != name_) return status(404, "NotFound");
      return testing::FakeResponse{200, json::serialize(*lease_)};
    }
    json::object body;
    try {
      body = json::parse(r.body).as_object();
    } catch (const std::exception&) {
      return status(400, "BadRequest");
    }
    const auto& meta = body["metadata"].as_object();
    if (r.method == "POST" && name.empty()) {
      if (lease_) return ++conflicts_, status(409, "AlreadyExists");
      name_ = std::string(meta.at("name").as_string());
      return store(std::move(body), 201);
    }
    if (r.method == "PUT") {
      if (!lease_ || name != name_) return status(404, "NotFound");
      const auto* rv = meta.if_contains("resourceVersion");
      if (rv && rv->as_string() != (*lease_)["metadata"].as_object()["resourceVersion"].as_string())
        return ++conflicts_, status(409, "Conflict");
      return store(std::move(body), 200);
    }
    return status(405, "MethodNotAllowed");
  }

  std::vector<Write> writes() const {
    std::lock_guard lock(mu_);
    return writes_;
  }
  std::optional<Write> last_write_by(const std::string& holder) const {
    std::lock_guard lock(mu_);
    for (auto it = writes_.rbegin(); it != writes_.rend(); ++it)
      if (it->holder == holder) return *it;
    return std::nullopt;
  }
  std::optional<Write> first_write_by(const std::string& holder) const {
    std::lock_guard lock(mu_);
    for (const auto& w : writes_)
      if (w.holder == holder) return w;
    return std::nullopt;
  }
  // Forgets the lease (between rounds of a test; no elector may be running).
  void reset() {
    std::lock_guard lock(mu_);
    lease_.reset();
    writes_.clear();
    conflicts_ = 0;
  }
  std::string holder() const {
    std::lock_guard lock(mu_);
    if (!lease_) return "";
    const auto* h = lease_->at("spec").as_object().if_contains("holderIdentity");
    return h && h->is_string() ? std::string(h->as_string()) : "";
  }
  int conflicts() const {  // 409s answered
    std::lock_guard lock(mu_);
    return conflicts_;
  }

  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  testing::FakeResponse store(boost::json::object body, int code) {
    auto& meta = body["metadata"].as_object();
    meta["resourceVersion"] = std::to_string(++version_);
    meta["uid"] = "0e5a1c2d-lease";
    const auto& spec = body["spec"].as_object();
    const auto* h = spec.if_contains("holderIdentity");
    const auto* tr = spec.if_contains("leaseTransitions");
    writes_.push_back({h && h->is_string() ? std::string(h->as_string()) : "", now(),
                       tr && tr->is_int64() ? static_cast<int>(tr->as_int64()) : 0});
    lease_ = std::move(body);
    return testing::FakeResponse{code, boost::json::serialize(*lease_)};
  }

  std::string ns_;
  mutable std::mutex mu_;
  std::optional<boost::json::object> lease_;
  std::string name_;
  int version_ = 100;
  int conflicts_ = 0;
  std::vector<Write> writes_;
};

}  // namespace tidegate::scaler
