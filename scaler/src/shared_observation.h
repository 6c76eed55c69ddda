#pragma once
// With `leader_election.kind: file` the replicas are the leader's child processes, which the
// other gateways' process actuators cannot see. The leader publishes what its actuators observe
// in a file next to the lock (<lock_file>.replicas.json, replaced atomically every tick), and
// the followers observe through it, so every gateway on the host routes the leader's replicas.
// A file older than max_age (the leader died or hangs) reads as no replicas.
#include <map>
#include <optional>
#include <string>

#include "tidegate/scaler/actuator.h"

namespace tidegate::scaler {

class SharedObservationFile final {
 public:
  SharedObservationFile(std::string path, double max_age_s) : path_(std::move(path)), max_age_s_(max_age_s) {}

  // Leader: every pool's latest observation, stamped with `writer` and unix time `now`.
  // False (with *error) if the file could not be replaced.
  bool write(const std::string& writer, double now, const std::map<std::string, PoolObservation>& by_model,
             std::string* error = nullptr) const;
  // Follower: the model's replicas as the leader last saw them, ids as "<writer>/<id>"; an empty
  // observation when the file is missing, unreadable or stale (a follower then routes nothing).
  PoolObservation read(const std::string& model, double now) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  double max_age_s_;
};

}  // namespace tidegate::scaler
