#!/usr/bin/env bash
# Prepares the device check on this (CPU) host, so the lent GPU machine spends no time building:
# it has CUDA but none of the Debian -dev packages. Builds the kernels binaries with CUDA here,
# then packs them, the shared libraries they load that a bare CUDA image lacks, and the MiniLM
# model (fp16, see minilm_f16.py) into .devcarry/carry.tar.xz (ignored by git, carried by the
# device call). On the device: bash bench/kernels/device_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-gpu}"
MODEL=third_party/models/all-MiniLM-L6-v2
[[ -f "$MODEL/model.safetensors" ]] || { echo "pack_for_device: run scripts/setup.sh first ($MODEL missing)" >&2; exit 1; }
configure=$(cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTIDEGATE_CUDA=ON)
grep -q "tidegate: CUDA kernels ON" <<<"$configure" ||
  { echo "pack_for_device: configure did not enable CUDA (nvcc missing?)" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target tidegate_kernels_cpu_tests tidegate_kernels_gpu_tests tidegate_kernels_bench

STAGE=.devcarry/stage
rm -rf .devcarry && mkdir -p "$STAGE/bin" "$STAGE/libs" "$STAGE/model"
cp "$BUILD"/bin/tidegate_kernels_{cpu_tests,gpu_tests,bench} "$STAGE/bin/"
pwd >"$STAGE/source_root"  # compiled into the binaries as TIDEGATE_SOURCE_ROOT
# Everything the binaries load except the C library, the kernel's vdso and CUDA's own libraries
# (cuBLAS and the driver come with the device image, matched to its driver).
ldd "$STAGE"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libcu' |
  while read -r lib; do cp -L "$lib" "$STAGE/libs/"; done
find "$MODEL" -maxdepth 2 -type f ! -name model.safetensors ! -name README.md -exec cp --parents {} "$STAGE/model/" \;
.venv/bin/python bench/kernels/minilm_f16.py pack "$MODEL/model.safetensors" "$STAGE/model/model_f16.safetensors"
tar -C "$STAGE" -cf - . | xz -T "$(nproc)" -6 >.devcarry/carry.tar.xz
rm -rf "$STAGE"
ls -la .devcarry
echo "pack_for_device: carry .devcarry; on the device run bash bench/kernels/device_run.sh"
