#pragma once
// One Asio event loop on its own thread for the Redis connections. The gateway's loops only post
// to it: parsing Redis replies and reconnecting never take time from a request's loop, and the
// clients' lifetime is tied to this object rather than to the gateway's shutdown order.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <thread>

namespace tidegate::redis {

class Loop final {
 public:
  Loop();
  // Without stop(): lets queued handlers finish (stop the clients first; bounded), then joins.
  ~Loop();
  // Stops running handlers now and joins the thread (idempotent). For a process's exit, before
  // what the handlers use (the metrics registry) goes: clients destroyed later only queue their
  // close here, and the Loop's destruction discards it.
  void stop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  boost::asio::io_context io_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace tidegate::redis
