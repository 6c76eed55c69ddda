#pragma once
// Drives a hiredis redisAsyncContext from an Asio strand: hiredis says when it wants to read or
// write its socket (its ev.addRead/addWrite hooks), Asio's async_wait on the descriptor says when
// the socket is ready, and the handlers call redisAsyncHandleRead/Write. All on one strand, since
// hiredis is not thread-safe.
#include <hiredis/async.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/strand.hpp>

#include <memory>

namespace tidegate::redis {

using Strand = boost::asio::strand<boost::asio::any_io_executor>;

class HiredisAsio final : public std::enable_shared_from_this<HiredisAsio> {
 public:
  // Installs the event hooks on `ac` (call on the strand, right after redisAsyncConnect). The
  // adapter keeps itself alive until hiredis cleans the context up; the socket stays hiredis's.
  static void attach(redisAsyncContext* ac, const Strand& strand);

  HiredisAsio(redisAsyncContext* ac, const Strand& strand);

 private:
  static HiredisAsio* self(void* p) { return static_cast<HiredisAsio*>(p); }
  void arm(bool write);
  void cleanup();

  redisAsyncContext* ac_;  // null once hiredis freed the context
  Strand strand_;
  boost::asio::posix::stream_descriptor fd_;
  bool want_[2] = {false, false};   // [0] read, [1] write: what hiredis asked for
  bool armed_[2] = {false, false};  // an async_wait is outstanding
  std::shared_ptr<HiredisAsio> keep_alive_;
};

}  // namespace tidegate::redis
