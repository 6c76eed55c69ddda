#pragma once
// The one boundary around filter code: an exception out of a hook would unwind through the
// worker's loop and end it. Here it is logged and counted by hook (tidegate_filter_errors_total);
// false tells the caller, which answers 500 when nothing was answered yet, else goes on.
#include "stats.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::gateway {

void filter_threw(GatewayStats& stats, const RequestContext* ctx, const char* hook, const char* what) noexcept;

template <typename Call>
bool invoke_filter(GatewayStats& stats, const RequestContext* ctx, const char* hook, Call&& call) noexcept {
  try {
    call();
    return true;
  } catch (const std::exception& e) {
    filter_threw(stats, ctx, hook, e.what());
  } catch (...) {
    filter_threw(stats, ctx, hook, "not a std::exception");
  }
  return false;
}

}  // namespace tidegate::gateway
