#include "hiredis_asio.h"

#include <boost/asio/bind_executor.hpp>

namespace tidegate::redis {

HiredisAsio::HiredisAsio(redisAsyncContext* ac, const Strand& strand)
    : ac_(ac), strand_(strand), fd_(strand.get_inner_executor(), ac->c.fd) {}

void HiredisAsio::attach(redisAsyncContext* ac, const Strand& strand) {
  auto a = std::make_shared<HiredisAsio>(ac, strand);
  a->keep_alive_ = a;
  ac->ev.data = a.get();
  ac->ev.addRead = [](void* p) { self(p)->want_[0] = true, self(p)->arm(false); };
  ac->ev.delRead = [](void* p) { self(p)->want_[0] = false; };
  ac->ev.addWrite = [](void* p) { self(p)->want_[1] = true, self(p)->arm(true); };
  ac->ev.delWrite = [](void* p) { self(p)->want_[1] = false; };
  ac->ev.cleanup = [](void* p) { self(p)->cleanup(); };
}

void HiredisAsio::arm(bool write) {
  const int i = write ? 1 : 0;
  if (!ac_ || armed_[i]) return;
  armed_[i] = true;
  // A wait that is no longer wanted when it fires is ignored (delRead/delWrite cannot cancel one
  // direction of a descriptor alone).
  fd_.async_wait(write ? boost::asio::posix::stream_descriptor::wait_write
                       : boost::asio::posix::stream_descriptor::wait_read,
                 boost::asio::bind_executor(strand_, [self = shared_from_this(), i](boost::system::error_code ec) {
                   self->armed_[i] = false;
                   if (ec || !self->ac_ || !self->want_[i]) return;
                   // Either call may free the context (EOF, error): cleanup() then nulls ac_.
                   if (i == 0) redisAsyncHandleRead(self->ac_);
                   else redisAsyncHandleWrite(self->ac_);
                   if (self->ac_ && self->want_[i]) self->arm(i == 1);
                 }));
}

void HiredisAsio::cleanup() {
  ac_ = nullptr;
  want_[0] = want_[1] = false;
  // hiredis closes the socket itself; release() only drops Asio's hold and aborts the waits.
  fd_.release();
  // Outstanding handlers hold their own references; this may be the last one, so it goes last.
  auto last = std::move(keep_alive_);
}

}  // namespace tidegate::redis
