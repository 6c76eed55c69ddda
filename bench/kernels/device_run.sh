#!/usr/bin/env bash
# Runs on the lent GPU machine, from the repository root, after pack_for_device.sh on the CPU
# host: unpacks .devcarry/carry.tar.xz, restores the fp32 model where the binaries look for it,
# checks that every library resolves (and stops at once if not, so a fix costs seconds), then
# runs gpu_check.sh on the prebuilt binaries. Extra arguments go to gpu_check.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
OUT="${OUT:-/tmp/kernels_gpu_check}"
mkdir -p "$OUT"
CARRY=.devcarry/unpacked
rm -rf "$CARRY" && mkdir -p "$CARRY" && xz -dc .devcarry/carry.tar.xz | tar -C "$CARRY" -xf - || exit 1

MODEL=third_party/models/all-MiniLM-L6-v2
if [[ ! -f "$MODEL/model.safetensors" ]]; then
  mkdir -p "$MODEL" && cp -r "$CARRY/model/$MODEL/." "$MODEL/" &&
    python3 bench/kernels/minilm_f16.py unpack "$CARRY/model/model_f16.safetensors" "$MODEL/model.safetensors" || exit 1
fi
# The test binaries were built with the source root of the host they were built on.
SRC_ROOT=$(cat "$CARRY/source_root")
if [[ -n "$SRC_ROOT" && "$SRC_ROOT" != "$ROOT" && ! -e "$SRC_ROOT" ]]; then
  mkdir -p "$(dirname "$SRC_ROOT")" && ln -s "$ROOT" "$SRC_ROOT"
fi

cublas=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 /{print $NF; exit}')
[[ -z "$cublas" ]] && cublas=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)
LIBPATH="$ROOT/$CARRY/libs"
[[ -n "$cublas" ]] && LIBPATH="$LIBPATH:$(dirname "$cublas")"
export LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "device_run: cuBLAS from ${cublas:-nowhere}; source root link ${SRC_ROOT:-none}"
if ldd "$CARRY"/bin/* | grep "not found"; then
  echo "device_run: unresolved libraries, stopping" >&2
  exit 3
fi
OUT="$OUT" bash bench/kernels/gpu_check.sh --prebuilt "$CARRY/bin" "$@"
