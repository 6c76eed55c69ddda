#pragma once
// With `leader_election.kind: file` the replicas are the leader's child processes, which the
// other gateways' process actuators cannot see. The leader publishes what its actuators observe
// in a file next to the lock (<lock_file>.replicas.json, replaced atomically every tick), and
// the followers observe through it, so every gateway on the host routes the leader's replicas.
// A file older than max_age (the leader died or hangs) reads as no replicas.
//
// A scale-down must not cut the followers' streams. The leader marks the replicas it drains
// (`draining`); a follower drains them too and lists, every tick, the replicas it still sends
// requests to in its own file (<lock_file>.replicas.json.held-by.<identity>); the leader stops
// a drained replica only once no fresh list names it (or its drain timeout passes).
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

  // Follower `identity`: the replicas (ids as read(): "<writer>/<id>") it routes or still
  // drains, by model. False (with *error) if the file could not be replaced.
  bool write_held(const std::string& identity, double now, const std::map<std::string, std::vector<std::string>>& by_model,
                  std::string* error = nullptr) const;
  // Leader `writer`: by model, the ids (its own, unqualified) of the replicas that some
  // follower's fresh list names; every list is read once. Lists older than max_age are ignored,
  // and removed once ten times older (their writer has gone).
  std::map<std::string, std::set<std::string>> held_elsewhere(const std::string& writer, double now) const;

  const std::string& path() const { return path_; }

 private:
  std::string held_path(const std::string& identity) const;

  std::string path_;
  double max_age_s_;
};

}  // namespace tidegate::scaler
