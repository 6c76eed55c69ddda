#pragma once
// What SIGHUP can and cannot apply. A reload swaps the gateway's own config (models, replicas,
// keys, limits, timeouts) in place; the listening socket, the worker threads and the sections
// other libraries built at start (cache, cost, scaler, redis, rate_limits) keep running as they
// were. Rather than apply part of an edit silently, the reload names what needs a restart.
#include <string>
#include <vector>

#include "tidegate/gateway/config.h"

namespace tidegate::app {

// Config keys whose change in `next` the running process does not apply (empty: all applied).
std::vector<std::string> needs_restart(const gateway::GatewayConfig& running, const gateway::GatewayConfig& next);

}  // namespace tidegate::app
