#include "replica_address.h"

#include <boost/asio/error.hpp>

namespace tidegate::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;

void resolve_address(const std::string& host, std::uint16_t port, ResolvedAddress& cache, const net::any_io_executor& ex,
                     std::function<void(boost::system::error_code, Endpoints)> done) {
  if (auto known = cache.get()) return done({}, std::move(known));
  boost::system::error_code ec;
  const auto ip = net::ip::make_address(host, ec);
  if (!ec) {
    auto literal = std::make_shared<const std::vector<tcp::endpoint>>(1, tcp::endpoint(ip, port));
    cache.set(literal);
    return done({}, std::move(literal));
  }
  // The resolver lives until its handler runs; the cache outlives it (the replica holds both
  // the cache and, through the caller's handler, itself).
  auto resolver = std::make_shared<tcp::resolver>(ex);
  resolver->async_resolve(host, std::to_string(port), [resolver, &cache, done = std::move(done)](
                                                           boost::system::error_code ec, tcp::resolver::results_type results) {
    if (!ec && results.empty()) ec = net::error::host_not_found;
    if (ec) return done(ec, nullptr);
    auto endpoints = std::make_shared<std::vector<tcp::endpoint>>();
    for (const auto& entry : results) endpoints->push_back(entry.endpoint());
    cache.set(endpoints);
    done({}, std::move(endpoints));
  });
}

}  // namespace tidegate::gateway
