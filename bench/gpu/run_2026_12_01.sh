#!/usr/bin/env bash
# One device call on the lent single H200 (2026-12-01): NVIDIA's nccl-tests built from source
# against the NCCL torch uses, run alone and through `podctl validate --local --nccl-tests`;
# the training smoke test with the corrected data; the health gate's wall time on a GPU node.
#
#   (device) bash bench/gpu/run_2026_12_01.sh      # needs .nccl-tests/ (NVIDIA/nccl-tests) and .whl/ carried
#
# Everything lands in $OUT; progress in $OUT/log.txt.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
date -u +%FT%TZ
nvidia-smi --query-gpu=index,name,memory.total,driver_version,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'

echo "== nccl-tests: build against torch's NCCL"
NCCL_PKG=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])')
ls "$NCCL_PKG" "$NCCL_PKG"/include "$NCCL_PKG"/lib
mkdir -p /tmp/nccl/lib
cp -r "$NCCL_PKG"/include /tmp/nccl/
ln -sf "$NCCL_PKG"/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
t0=$SECONDS
make -C .nccl-tests -j16 NCCL_HOME=/tmp/nccl CUDA_HOME="$CUDA_HOME" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$OUT/nccl-tests-build.log" 2>&1
echo "build exit $? in $((SECONDS - t0)) s"
export LD_LIBRARY_PATH="$NCCL_PKG/lib:${LD_LIBRARY_PATH:-}"
ls .nccl-tests/build/*_perf

echo "== nccl-tests alone: all_reduce_perf -g 1, bf16, 1 GiB and 8 GiB"
.nccl-tests/build/all_reduce_perf -b 1G -e 8G -f 8 -g 1 -d bfloat16 -c 1 > "$OUT/all_reduce_perf-g1.txt" 2>&1
tail -n 12 "$OUT/all_reduce_perf-g1.txt"

echo "== podctl validate --local: collectives with nccl-tests beside, 1 GPU"
t0=$SECONDS
timeout 400 python3 -m podctl.cli validate --local --profile hgx-h200-2 --gpus 1 --suite collectives \
    --nccl-tests .nccl-tests/build --report "$OUT/validate-collectives"
echo "validate collectives exit $? in $((SECONDS - t0)) s"

echo "== training smoke, 1 GPU, the corrected data (every token id occurs)"
timeout 300 python3 -m validation.smoke --local-procs 1 --peak-tflops 989 --checkpoint-dir /tmp/podctl-smoke \
    > "$OUT/smoke-g1.json"
echo "smoke exit $?"

echo "== health gate on this GPU node, 5 runs"
cat > /tmp/health.json <<EOF
{"node": "$(hostname -s)", "timeout_s": 10, "mount_timeout_s": 3, "mounts": [],
 "free_space": [{"path": "/tmp", "min_free_gib": 1}], "min_free_memory_gib": 1, "services": [],
 "node_check": {"python": "python3", "argv": ["-m", "validation.health", "--expect-gpus", "1",
   "--expect-gpu-model", "H200", "--expect-gpu-memory-gib", "141", "--expect-pcie-width", "16",
   "--xid-state", "/tmp/gate/xid.json"]},
 "drain": false, "textfile_dir": "/tmp/gate/textfile"}
EOF
for i in 1 2 3 4 5; do
    python3 validation/healthgate.py --expect /tmp/health.json --state /tmp/gate --no-drain --print > "$OUT/gate-$i.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('gate run', sys.argv[2], r['status'], r['duration_s'], 's', r.get('findings'), r.get('errors'))" "$OUT/gate-$i.json" "$i"
done
t0=$(date +%s.%N); python3 -m validation.health --expect-gpus 1 --expect-gpu-model H200 > "$OUT/health-alone.json"; t1=$(date +%s.%N)
echo "validation.health alone: $(python3 -c "print(round($t1 - $t0, 2))") s"
