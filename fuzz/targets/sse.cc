// The upstream SSE parser (gateway/src/sse.cc) as the stream relay drives it (request_stream.cc): feed
// the bytes one read at a time (at most 16 KiB, the relay's chunk buffer), pull events until
// none is left, and hand each event's data to accumulate_stream_chunk.
//
// Checks:
//  - cutting the stream into reads anywhere gives the same events (raw bytes, data, event
//    field), the same pending bytes and the same summary as one read of the whole;
//  - every event's raw bytes end with a blank line, and the events plus the pending bytes are
//    the input less the stray blank lines between events;
//  - data is the event's "data:" lines joined with '\n';
//  - overflowed() becomes true exactly when an event's buffered bytes would pass
//    kMaxEventBytes (4 MiB), after which nothing is pending; reset() gives a parser that
//    behaves as a new one. The 4 MiB path runs for one input in 16 (the input repeated in reads
//    of 16 KiB without a blank line until it overflows), so most runs stay fast.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sse.h"

using namespace tidegate::gateway;

namespace {

struct Ev {
  std::string raw, data, event;
  bool operator==(const Ev&) const = default;
};

struct Run {
  std::vector<Ev> events;
  std::size_t pending = 0;
  CompletionSummary summary;
  bool overflowed = false;
};

void drain(SseParser& p, Run& r) {
  SseEvent ev;
  while (p.next(ev)) {
    r.events.push_back({std::string(ev.raw), std::string(ev.data), std::string(ev.event)});
    accumulate_stream_chunk(ev.data, r.summary);
  }
  r.pending = p.pending_bytes();
  r.overflowed = p.overflowed();
}

Run feed_in_pieces(SseParser& p, std::string_view input, fuzz::Rng* rng) {
  Run r;
  std::size_t at = 0;
  while (at < input.size()) {
    std::size_t n = std::min<std::size_t>(input.size() - at, 16384);
    if (rng) n = std::min(n, rng->range(1, rng->next() % 4 == 0 ? 4096 : 48));
    p.feed(input.substr(at, n));
    at += n;
    drain(p, r);
  }
  drain(p, r);
  return r;
}

// The data field of one event, from its raw bytes, written without the parser's code.
std::string expected_data(std::string_view raw) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < raw.size()) {
    auto nl = raw.find('\n', pos);
    std::string line(raw.substr(pos, nl - pos));
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data", 0) != 0) continue;
    if (line.size() == 4) {
      lines.emplace_back();
    } else if (line[4] == ':') {
      lines.push_back(line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5));
    }
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

void check_same(const Run& a, const Run& b, std::string_view input, const char* what) {
  FUZZ_CHECK(a.events.size() == b.events.size(), "event count depends on how the stream was cut", input, what);
  for (std::size_t i = 0; i < a.events.size(); ++i)
    FUZZ_CHECK(a.events[i] == b.events[i], "an event depends on how the stream was cut", a.events[i].raw, b.events[i].raw);
  FUZZ_CHECK(a.pending == b.pending, "pending bytes depend on how the stream was cut", input, what);
  FUZZ_CHECK(a.summary.content == b.summary.content && a.summary.done == b.summary.done &&
                 a.summary.prompt_tokens == b.summary.prompt_tokens &&
                 a.summary.completion_tokens == b.summary.completion_tokens &&
                 a.summary.finish_reason == b.summary.finish_reason,
             "summary depends on how the stream was cut", input, what);
}

// True when s holds only blank lines ("\n" or "\r\n"), as the parser skips between events.
bool only_blank_lines(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '\n') ++i;
    else if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') i += 2;
    else return false;
  }
  return true;
}

void overflow_path(std::string_view input) {
  // The input with its newlines turned into spaces: one event that never ends.
  std::string unit(input);
  for (auto& c : unit)
    if (c == '\n') c = ' ';
  if (unit.empty()) unit = "x";
  std::string piece;
  while (piece.size() < 16384) piece += unit;
  piece.resize(16384);
  SseParser p;
  std::size_t fed = 0;
  for (int i = 0; i < 300 && !p.overflowed(); ++i) {
    const std::size_t before = p.pending_bytes();
    p.feed(piece);
    fed += piece.size();
    SseEvent ev;
    FUZZ_CHECK(!p.next(ev) || p.overflowed(), "an event came out of a stream without blank lines");
    FUZZ_CHECK(p.overflowed() == (before + piece.size() > SseParser::kMaxEventBytes), "overflowed() at the wrong size");
  }
  FUZZ_CHECK(p.overflowed() && fed > SseParser::kMaxEventBytes && p.pending_bytes() == 0, "overflow not reported");
  p.reset();
  FUZZ_CHECK(!p.overflowed() && p.pending_bytes() == 0, "reset() after overflow");
  SseParser fresh;
  check_same(feed_in_pieces(p, input, nullptr), feed_in_pieces(fresh, input, nullptr), input, "after reset");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::uint64_t h = fuzz::fnv1a(data, size);
  fuzz::Rng rng(h);

  SseParser whole_p, cut_p, byte_p;
  const Run whole = feed_in_pieces(whole_p, input, nullptr);
  FUZZ_CHECK(!whole.overflowed, "overflow on a short stream");
  check_same(whole, feed_in_pieces(cut_p, input, &rng), input, "random reads");
  if (size <= 2048) {
    Run r;
    for (std::size_t i = 0; i < size; ++i) {
      byte_p.feed(input.substr(i, 1));
      drain(byte_p, r);
    }
    check_same(whole, r, input, "one byte at a time");
  }

  // Accounting: events, then stray blank lines, then what is pending.
  std::size_t at = 0;
  for (const auto& e : whole.events) {
    const auto found = input.find(e.raw, at);
    FUZZ_CHECK(found != std::string_view::npos && only_blank_lines(input.substr(at, found - at)),
               "bytes between events are not blank lines", input, e.raw);
    at = found + e.raw.size();
    FUZZ_CHECK(e.raw.size() >= 2 && e.raw.back() == '\n' &&
                   (e.raw[e.raw.size() - 2] == '\n' ||
                    (e.raw.size() >= 3 && e.raw[e.raw.size() - 2] == '\r' && e.raw[e.raw.size() - 3] == '\n')),
               "an event does not end with a blank line", e.raw);
    FUZZ_CHECK(e.data == expected_data(e.raw), "data is not the event's data lines joined", e.raw, e.data);
  }
  const auto rest = input.substr(at);
  FUZZ_CHECK(whole.pending <= rest.size(), "pending bytes", input);
  FUZZ_CHECK(only_blank_lines(rest.substr(0, rest.size() - whole.pending)), "lost bytes before the pending event", input);

  if ((h >> 60) == 0) overflow_path(input);
  return 0;
}
