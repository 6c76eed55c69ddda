#include "shared_observation.h"

#include <boost/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tidegate::scaler {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// Write aside, then rename over: a reader sees the old file or the new one, never half.
bool replace_file(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      if (error) *error = "writing " + tmp + ": " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = "renaming onto " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// The file's JSON, or nullopt when it is missing, unreadable or not JSON.
std::optional<json::value> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  auto v = json::parse(ss.str(), ec);
  if (ec) return std::nullopt;
  return v;
}

}  // namespace

bool SharedObservationFile::write(const std::string& writer, double now,
                                  const std::map<std::string, PoolObservation>& by_model, std::string* error) const {
  json::object pools;
  for (const auto& [model, obs] : by_model) {
    json::array replicas;
    for (const auto& r : obs.replicas)
      replicas.push_back(json::object{{"id", r.id}, {"host", r.endpoint.host}, {"port", r.endpoint.port},
                                      {"ready", r.ready}, {"exited", r.exited}, {"detail", r.detail},
                                      {"draining", r.draining}});
    pools[model] = json::object{{"replicas", std::move(replicas)}, {"pending", obs.pending}};
  }
  return replace_file(path_, json::serialize(json::object{{"writer", writer}, {"t", now}, {"pools", std::move(pools)}}),
                      error);
}

bool SharedObservationFile::write_held(const std::string& identity, double now,
                                       const std::map<std::string, std::vector<std::string>>& by_model,
                                       std::string* error) const {
  json::object pools;
  for (const auto& [model, ids] : by_model) {
    json::array list;
    for (const auto& id : ids) list.push_back(json::string(id));
    pools[model] = std::move(list);
  }
  return replace_file(held_path(identity), json::serialize(json::object{{"t", now}, {"pools", std::move(pools)}}),
                      error);
}

std::string SharedObservationFile::held_path(const std::string& identity) const {
  std::string name = identity;  // a file name: no separators
  for (char& c : name)
    if (c == '/' || c == '\\') c = '_';
  return path_ + ".held-by." + name;
}

std::map<std::string, std::set<std::string>> SharedObservationFile::held_elsewhere(const std::string& writer,
                                                                                   double now) const {
  std::map<std::string, std::set<std::string>> held;
  const fs::path mine(path_);
  const std::string prefix = mine.filename().string() + ".held-by.";
  const std::string qualifier = writer + "/";
  std::error_code ec;
  for (fs::directory_iterator it(mine.parent_path().empty() ? fs::path(".") : mine.parent_path(), ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.find(".tmp.", prefix.size()) != std::string::npos) continue;
    const auto v = read_json(it->path().string());
    const auto* root = v ? v->if_object() : nullptr;
    const auto* t = root ? root->if_contains("t") : nullptr;
    if (!t || !t->is_number()) continue;
    const double age = now - t->to_number<double>();
    if (age > 10 * max_age_s_) {
      std::error_code gone;  // not `ec`: a file that cannot be removed must not end the scan
      fs::remove(it->path(), gone);
    }
    const auto* pools = root->if_contains("pools");
    if (age > max_age_s_ || !pools || !pools->is_object()) continue;
    for (const auto& [model, list] : pools->as_object()) {
      if (!list.is_array()) continue;
      auto& ids = held[std::string(model)];
      for (const auto& id : list.as_array())
        if (id.is_string() && id.as_string().starts_with(qualifier))
          ids.insert(std::string(id.as_string().subview(qualifier.size())));
    }
  }
  return held;
}

PoolObservation SharedObservationFile::read(const std::string& model, double now) const {
  PoolObservation obs;
  const auto v = read_json(path_);
  if (!v || !v->is_object()) return obs;
  const auto& root = v->as_object();
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
    if (const auto* d = o.if_contains("draining"); d && d->is_bool()) r.draining = d->as_bool();
    obs.replicas.push_back(std::move(r));
  }
  return obs;
}

}  // namespace tidegate::scaler
