// tidegate --config FILE       run the gateway (SIGHUP reloads, SIGTERM drains)
// tidegate --check-config FILE validate and exit (0: "config ok", 2: the error)
#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>

#include "tidegate/common/config_error.h"
#include "tidegate/common/log.h"
#include "tidegate/gateway/gateway.h"

namespace {

int usage() {
  std::cerr << "usage: tidegate --config FILE | --check-config FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tidegate;
  std::string config_path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--config" || arg == "--check-config") && i + 1 < argc) {
      check_only = arg == "--check-config";
      config_path = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else {
      return usage();
    }
  }
  if (config_path.empty()) return usage();

  std::shared_ptr<const gateway::GatewayConfig> config;
  try {
    config = gateway::load_gateway_config(config_path);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (check_only) {
    std::cout << "config ok\n";
    return 0;
  }

  // Signals are taken by one thread with sigwait, so no handler runs inside event loops.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  gateway::Gateway gw(config);
  try {
    gw.start();
  } catch (const std::exception& e) {
    log::error("gateway.start_failed", {{"error", e.what()}});
    return 1;
  }
  std::thread signals([&] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGHUP) {
        try {
          gw.reload(gateway::load_gateway_config(config_path));
        } catch (const ConfigError& e) {
          // A bad edit keeps the running config; the operator sees why.
          log::error("gateway.reload_failed", {{"error", e.what()}});
        }
        continue;
      }
      gw.drain();
      return;
    }
  });
  gw.wait();
  signals.join();
  log::info("gateway.exit");
  return 0;
}
