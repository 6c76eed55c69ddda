#include "tidegate/redis/loop.h"

#include <chrono>

namespace tidegate::redis {

Loop::Loop() : work_(boost::asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}

void Loop::stop() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

Loop::~Loop() {
  if (!thread_.joinable()) return;  // stopped already
  work_.reset();
  // run() returns once the stopped clients' last handlers ran; a client left running (its
  // reconnect timer is work too) must not hang the process's exit, so the wait is bounded.
  for (int i = 0; i < 200 && !io_.stopped(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  io_.stop();
  thread_.join();
}

}  // namespace tidegate::redis
