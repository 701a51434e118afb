#!/usr/bin/env bash
# Runs the node-side checks on one GPU host, one after another, each writing
# its JSON envelope to $OUT/<check>.json and its progress to $OUT/log.txt.
#
#   OUT=bench/out bash bench/gpu/run_all.sh [health] [burnin] [collectives] [smoke]
#
# With no arguments it runs the four checks; gemm_variants is a GEMM shape sweep. Expectations below are those of the lent
# 2 x H200 host (podctl/profiles/hgx-h200-2.yaml, ../shared/reference/figures.md):
# all_reduce busbw >= 97% of 324 / 347 GB/s at 1 / 8 GiB, MFU >= 50% of 989.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-bench/out}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
mkdir -p "$OUT"
log=$OUT/log.txt
steps=${*:-health burnin collectives smoke}

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  nproc; grep MemTotal /proc/meminfo
} >>"$log" 2>&1

step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" >>"$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.json" 2>>"$log"
  echo "== $name: exit $? after $((SECONDS - t0)) s" >>"$log"
}

for s in $steps; do
  case $s in
    health)
      step health 60 python3 -m validation.health --expect-gpus "$GPUS" --expect-gpu-model H200 \
        --expect-gpu-memory-gib 141 --expect-nvlinks 18 --expect-cores 32 --expect-memory-gib 256 --expect-hcas 0 ;;
    burnin)
      step burnin 240 python3 -m validation.burnin --profile quick ;;
    collectives)
      step collectives 300 python3 -m validation.collectives --local-procs "$GPUS" --expect-world-size "$GPUS" \
        --min-busbw all_reduce:1GiB=314.3 --min-busbw all_reduce:8GiB=336.6 ;;
    smoke)
      step smoke 420 python3 -m validation.smoke --local-procs "$GPUS" --expect-world-size "$GPUS" \
        --peak-tflops 989 --min-mfu 0.50 --checkpoint-dir /tmp/podctl-smoke ;;
    gemm_variants)
      echo "== gemm_variants" >>"$log"
      timeout 120 python3 bench/gpu/gemm_variants.py >"$OUT/gemm_variants.txt" 2>>"$log" ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
python3 bench/gpu/summarize.py "$OUT"/*.json
