#!/usr/bin/env bash
# tidegate --check-config and the cache's model folder (issue 17): a missing folder fails the
# check naming the key and the path; a relative one is read from the config file's folder,
# whatever the working directory, and never from anywhere else.
#   check_config_test.sh <tidegate binary>
set -euo pipefail
tidegate=$(realpath "$1")  # the checks run from another working directory
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# config <file> <model_dir>: a minimal gateway with a minilm cache.
config() {
  cat >"$1" <<YAML
listen: "127.0.0.1:0"
models:
  - name: llama
    replicas:
      - {id: r1, url: "http://127.0.0.1:9"}
cache:
  embedder: {type: minilm, device: cpu, model_dir: $2}
YAML
}
# model <dir>: the files the loader needs, as stand-ins (the check only looks for them).
model() { mkdir -p "$1" && touch "$1/config.json" "$1/vocab.txt" "$1/model.safetensors"; }

mkdir -p "$tmp/etc" "$tmp/elsewhere"
cd "$tmp/elsewhere"

# 1. A missing absolute folder.
config "$tmp/etc/abs.yaml" "$tmp/nowhere/minilm"
if out=$("$tidegate" --check-config "$tmp/etc/abs.yaml" 2>&1); then fail "missing folder passed: $out"; fi
grep -q "cache.embedder.model_dir" <<<"$out" || fail "error does not name the key: $out"
grep -q "$tmp/nowhere/minilm does not exist" <<<"$out" || fail "error does not name the folder: $out"

# 2. Relative, beside the config file, checked from another working directory.
model "$tmp/etc/models/minilm"
config "$tmp/etc/rel.yaml" "models/minilm"
out=$("$tidegate" --check-config "$tmp/etc/rel.yaml" 2>&1) || fail "relative folder beside the config failed: $out"
grep -q "config ok" <<<"$out" || fail "unexpected output: $out"

# 3. Relative, missing beside the config file but present in the working directory: an error.
model "$tmp/elsewhere/only-here"
config "$tmp/etc/cwd.yaml" "only-here"
if out=$("$tidegate" --check-config "$tmp/etc/cwd.yaml" 2>&1); then fail "used the working directory's folder: $out"; fi
grep -q "$tmp/etc/only-here does not exist" <<<"$out" || fail "error does not name the resolved folder: $out"
grep -q "config file's folder" <<<"$out" || fail "error does not say where relative paths are read from: $out"

# 4. The same file with the cache switched off needs no model.
sed 's/^cache:/cache:\n  enabled: false/' "$tmp/etc/abs.yaml" >"$tmp/etc/off.yaml"
out=$("$tidegate" --check-config "$tmp/etc/off.yaml" 2>&1) || fail "disabled cache still needs a model: $out"
# 5. A section of the wrong shape where a parser indexes into it (yaml-cpp's BadSubscript used
#    to escape the loader: an abort here, and the running gateway's death on SIGHUP).
for bad in "targets: 5" "signals: x"; do
  cat >"$tmp/etc/shape.yaml" <<YAML
listen: "127.0.0.1:0"
models:
  - name: llama
    replicas: []
scaler:
  pools:
    - model: llama
      actuator: {kind: process, command: [x, "{port}"], ports: 30000-30010}
      policy: {min_replicas: 1, max_replicas: 2}
      $bad
YAML
  set +e
  out=$("$tidegate" --check-config "$tmp/etc/shape.yaml" 2>&1)
  rc=$?
  set -e
  [[ $rc == 2 ]] || fail "'$bad': exit $rc, not a config error: $out"
  grep -q "^config: scaler" <<<"$out" || fail "'$bad': error does not name the section: $out"
done
# 6. The shared-state sections (issue 22): checked by the binary, named by key and line.
shared() {
  printf 'listen: "127.0.0.1:0"\nmodels:\n  - name: llama\n    replicas: []\n%s\n' "$1" >"$tmp/etc/shared.yaml"
  set +e
  out=$("$tidegate" --check-config "$tmp/etc/shared.yaml" 2>&1)
  rc=$?
  set -e
}
shared $'redis: {address: 127.0.0.1:6379}\nrate_limits:\n  - {scope: "key:*", requests_per_minute: 60}'
[[ $rc == 0 ]] || fail "valid redis and rate_limits sections refused: $out"
shared $'redis:\n  address: localhost'
[[ $rc == 2 ]] && grep -q "redis.address" <<<"$out" && grep -q "line 6" <<<"$out" || fail "bad redis address: $out"
shared $'rate_limits:\n  - {scope: "team:x", requests_per_minute: 1}'
[[ $rc == 2 ]] && grep -q "rate_limits\[0\].scope" <<<"$out" && grep -q "line 6" <<<"$out" || fail "bad scope: $out"
echo "ok"
