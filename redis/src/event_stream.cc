// EventStream (tidegate/redis/event_stream.h): XADD with the gateway's id and number, XREAD BLOCK
// on a connection of its own, gaps in other gateways' numbers counted.
#include "tidegate/redis/event_stream.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdlib>

#include "tidegate/common/log.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::redis {
namespace {

constexpr double kBlockS = 1.0;   // one XREAD waits this long for news, then asks again
constexpr double kRetryS = 0.25;  // after a failed read (Redis down): the client fails fast

void bump(prometheus::Counter* c, double by = 1) {
  if (c) c->Increment(by);
}

}  // namespace

StreamCounters register_stream_counters(prometheus::Registry* registry, const std::string& name, const std::string& help,
                                        std::initializer_list<std::pair<const char*, prometheus::Counter**>> extra) {
  if (!registry) return {};
  auto& f = prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
  for (const auto& [event, counter] : extra) *counter = &f.Add({{"event", event}});
  return {&f.Add({{"event", "published"}}), &f.Add({{"event", "publish_failed"}}), &f.Add({{"event", "applied"}}),
          &f.Add({{"event", "missed"}})};
}

EventStream::EventStream(std::shared_ptr<Client> publisher, std::shared_ptr<Client> reader, Options options,
                         StreamCounters counters, OnEvent on_event)
    : publisher_(std::move(publisher)), reader_(std::move(reader)), options_(std::move(options)),
      counters_(counters), on_event_(std::move(on_event)), id_(random_gateway_id()) {}

std::shared_ptr<EventStream> EventStream::start(std::shared_ptr<Client> publisher, std::shared_ptr<Client> reader,
                                                Options options, StreamCounters counters, OnEvent on_event) {
  auto s = std::make_shared<EventStream>(std::move(publisher), std::move(reader), std::move(options), counters,
                                         std::move(on_event));
  log::info(s->options_.log_name + ".shared_stream_start", {{"stream", s->options_.key}, {"gateway_id", s->id_}});
  s->read_next();
  return s;
}

void EventStream::publish(std::vector<std::string> fields) {
  if (stopped_) return;
  std::vector<std::string> args{"XADD", options_.key, "MAXLEN", "~", std::to_string(options_.max_len), "*",
                                "origin", id_, "seq", std::to_string(++seq_)};
  args.reserve(args.size() + fields.size());
  for (auto& f : fields) args.push_back(std::move(f));
  publisher_->command(std::move(args), [c = counters_](Result r) { bump(r.ok() ? c.published : c.publish_failed); });
}

void EventStream::stop() {
  if (stopped_.exchange(true)) return;
  reader_->stop();  // ends the XREAD in flight
}

void EventStream::read_next() {
  if (stopped_) return;
  reader_->command({"XREAD", "COUNT", "256", "BLOCK", std::to_string(static_cast<int>(kBlockS * 1000)), "STREAMS",
                    options_.key, last_id_},
                   [weak = weak_from_this()](Result r) {
                     if (auto self = weak.lock()) self->on_read(r);
                   },
                   kBlockS + 2.0);
}

// On the reader's strand.
void EventStream::on_read(const Result& r) {
  if (stopped_) return;
  if (!r.ok()) {  // Redis down or slow: local only until it answers again
    auto timer = std::make_shared<boost::asio::steady_timer>(
        reader_->executor(), std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(kRetryS)));
    timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->read_next();
    });
    return;
  }
  // Nil: nothing new within the block. Otherwise [[stream, [[id, [field, value, ...]], ...]]].
  if (r.reply.type == Reply::Type::kArray)
    for (const auto& stream : r.reply.elements)
      if (stream.elements.size() == 2)
        for (const auto& entry : stream.elements[1].elements) apply(entry);
  read_next();
}

void EventStream::apply(const Reply& entry) {
  if (entry.elements.size() != 2) return;
  last_id_ = entry.elements[0].str;
  Fields f;
  const auto& kv = entry.elements[1].elements;
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) f[kv[i].str] = kv[i + 1].str;
  const auto origin = f["origin"];
  if (origin == id_) return;
  note_sequence(origin, std::strtoull(f["seq"].c_str(), nullptr, 10));
  if (on_event_(f)) bump(counters_.applied);
}

// A gap in a gateway's numbering: events trimmed (or written while this reader was away).
void EventStream::note_sequence(const std::string& origin, std::uint64_t seq) {
  auto& last = last_seq_[origin];
  if (last != 0 && seq > last + 1) {
    const auto missed = seq - last - 1;
    bump(counters_.missed, static_cast<double>(missed));
    log::warn(options_.log_name + ".shared_stream_behind",
              {{"stream", options_.key}, {"origin", origin}, {"missed", missed},
               {"why", "trimmed before this gateway read them; carrying on"}});
  }
  if (seq > last) last = seq;
}

}  // namespace tidegate::redis
