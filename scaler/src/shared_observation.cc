#include "shared_observation.h"

#include <boost/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tidegate::scaler {
namespace json = boost::json;

bool SharedObservationFile::write(const std::string& writer, double now,
                                  const std::map<std::string, PoolObservation>& by_model, std::string* error) const {
  json::object pools;
  for (const auto& [model, obs] : by_model) {
    json::array replicas;
    for (const auto& r : obs.replicas)
      replicas.push_back(json::object{{"id", r.id}, {"host", r.endpoint.host}, {"port", r.endpoint.port},
                                      {"ready", r.ready}, {"exited", r.exited}, {"detail", r.detail}});
    pools[model] = json::object{{"replicas", std::move(replicas)}, {"pending", obs.pending}};
  }
  const std::string text = json::serialize(json::object{{"writer", writer}, {"t", now}, {"pools", std::move(pools)}});
  // Write aside, then rename over: a reader sees the old file or the new one, never half.
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      if (error) *error = "writing " + tmp + ": " + std::strerror(errno);
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    if (error) *error = "renaming onto " + path_ + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

PoolObservation SharedObservationFile::read(const std::string& model, double now) const {
  PoolObservation obs;
  std::ifstream in(path_);
  if (!in) return obs;
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  const auto v = json::parse(ss.str(), ec);
  if (ec || !v.is_object()) return obs;
  const auto& root = v.as_object();
  const auto* t = root.if_contains("t");
  if (!t || !t->is_number() || now - t->to_number<double>() > max_age_s_) return obs;
  // Replica ids are only unique within one process actuator ("m-1"): qualified with the writer,
  // so that a follower that takes over never mistakes its own new "m-1" for the dead leader's.
  const auto* writer = root.if_contains("writer");
  const std::string prefix = (writer && writer->is_string() ? std::string(writer->as_string()) : "leader") + "/";
  const auto* pools = root.if_contains("pools");
  const auto* pool = pools && pools->is_object() ? pools->as_object().if_contains(model) : nullptr;
  if (!pool || !pool->is_object()) return obs;
  if (const auto* p = pool->as_object().if_contains("pending"); p && p->is_int64())
    obs.pending = static_cast<int>(p->as_int64());
  const auto* list = pool->as_object().if_contains("replicas");
  if (!list || !list->is_array()) return obs;
  for (const auto& item : list->as_array()) {
    if (!item.is_object()) continue;
    const auto& o = item.as_object();
    const auto* id = o.if_contains("id");
    const auto* host = o.if_contains("host");
    const auto* port = o.if_contains("port");
    if (!id || !id->is_string() || !host || !host->is_string() || !port || !port->is_number()) continue;
    ObservedReplica r;
    r.id = prefix + std::string(id->as_string());
    r.endpoint.host = std::string(host->as_string());
    r.endpoint.port = static_cast<std::uint16_t>(port->to_number<int>());
    if (const auto* ready = o.if_contains("ready"); ready && ready->is_bool()) r.ready = ready->as_bool();
    if (const auto* exited = o.if_contains("exited"); exited && exited->is_bool()) r.exited = exited->as_bool();
    if (const auto* d = o.if_contains("detail"); d && d->is_string()) r.detail = std::string(d->as_string());
    obs.replicas.push_back(std::move(r));
  }
  return obs;
}

}  // namespace tidegate::scaler
