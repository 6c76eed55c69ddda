#pragma once
// A replica's address, resolved off the event loop and kept. An IP literal needs no lookup; a
// host name is looked up with Asio's async_resolve (getaddrinfo runs on Asio's own resolver
// thread, never on a worker's loop), once, and again only after a connect to it failed: the
// name may point somewhere else now (a restarted pod, a moved service).
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tidegate::gateway {

using Endpoints = std::shared_ptr<const std::vector<boost::asio::ip::tcp::endpoint>>;

// One replica's last good lookup. Thread-safe: every worker's connects share it.
class ResolvedAddress final {
 public:
  Endpoints get() const {
    std::lock_guard lock(mu_);
    return endpoints_;
  }
  void set(Endpoints e) {
    std::lock_guard lock(mu_);
    endpoints_ = std::move(e);
  }
  void forget() { set(nullptr); }

 private:
  mutable std::mutex mu_;
  Endpoints endpoints_;
};

// Calls done(ec, endpoints) with the address of host:port: at once (inline) when it is an IP
// literal or already known in `cache`, else on `ex` once the lookup ends (storing a success in
// `cache`). A failed lookup says host_not_found with no endpoints.
void resolve_address(const std::string& host, std::uint16_t port, ResolvedAddress& cache,
                     const boost::asio::any_io_executor& ex,
                     std::function<void(boost::system::error_code, Endpoints)> done);

}  // namespace tidegate::gateway
