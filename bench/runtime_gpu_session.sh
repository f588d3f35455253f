#!/usr/bin/env bash
# One GPU session for the Triton runtime: GPU tests, decode tuning sweeps, benchmark suite.
# Logs and JSON go to $OUT (default bench/results/session). Usage:
#   bash bench/runtime_gpu_session.sh [tests] [tune] [round8] [round9] [round12] [round12c] [round12d] [round14] [round14tests] [round15] [round15b] [round15suite] [round15tests] [round15prefill] [round15c] [round16] [round16b] [round16c] [round16d] [round16suite] [round17] [round17b] [round17c] [round17suite] [round18] [round18b] [round18suite] [round18c] [round18d] [round18e] [round19] [round19b] [round19suite] [round20] [round20b] [round20suite] [round20d] [round20e] [round20f] [round20g] [round20suite2] [round20h] [round21] [round21b] [round21c] [round21d] [round21e] [round21f] [round21g] [round21h] [round22] [round22b] [round22c] [round22d] [round22e] [round22f] [round22g] [round23] [round23b] [round23suite] [round23host] [round23c] [round23d] [round24] [round24b] [round24c] [round24d] [round24e] [round24f] [round24g] [round25] [round25b] [round25c] [round25d] [round25e] [round25f] [round25g] [round26] [round26b] [round26c] [round26suite] [round26d] [round26e] [round26f] [suite] [write]
set -o pipefail
OUT=${OUT:-bench/results/session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
steps=${*:-tests tune suite}
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  $PY -c "import torch, triton; p = torch.cuda.get_device_properties(0); print(torch.__version__, triton.__version__, p.name, p.multi_processor_count, 'SMs')"
} 2>&1 | tee "$OUT/env.log"
for step in $steps; do
  case $step in
    tests)  # every GPU test of tests/runtime on 12 pytest-xdist workers (the GPU image has it;
      #      ~150 s on an H200). Only the GPU tests: the planner-side tests beside them need
      #      pydantic and typer, which the GPU image lacks (round 23e: 9 such failures)
      timeout 450 $PY -m pytest -q -p no:cacheprovider -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log" ;;
    tune)
      timeout 240 $PY bench/tune_attention.py --shape 64,4096,32,8,128 \
        --modes int8_per_token_head,fp8_per_token_head --paged3d 1 --imma 1,0 \
        --configs 64:2:3,64:2:2,32:2:3,128:4:2,64:4:3 --maxnreg 0,168 \
        --out "$OUT/tuneA.json" 2>&1 | tee "$OUT/tuneA.log"
      timeout 150 $PY bench/tune_attention.py --shape 128,2048,64,8,64 \
        --modes int8_per_token_head,fp8_per_token_head --paged3d 1 --imma 1,0 \
        --configs 128:2:2,64:2:3,128:4:2,64:4:2 --maxnreg 0,168 \
        --out "$OUT/tuneB.json" 2>&1 | tee "$OUT/tuneB.log"
      timeout 60 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes bfloat16,fp8 \
        --paged3d 1,0 --configs 64:4:3 --out "$OUT/tuneC.json" 2>&1 | tee "$OUT/tuneC.log" ;;
    tune2)
      timeout 240 $PY bench/tune_attention.py --shape 64,4096,32,8,128 \
        --modes int8_per_token_head,fp8_per_token_head --imma 1,0 --configs 64:2:3 \
        --splits 0,2,3 --maxnreg 0,128,168 --out "$OUT/tune2A.json" 2>&1 | tee "$OUT/tune2A.log"
      timeout 120 $PY bench/tune_attention.py --shape 128,2048,64,8,64 \
        --modes int8_per_token_head,fp8_per_token_head --imma 1 --configs 128:2:2 \
        --splits 0,2,3 --maxnreg 0,128,168 --out "$OUT/tune2B.json" 2>&1 | tee "$OUT/tune2B.log"
      timeout 60 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes bfloat16 \
        --configs 64:4:3 --splits 0,2 --maxnreg 0,128 --out "$OUT/tune2C.json" 2>&1 | tee "$OUT/tune2C.log" ;;
    tune3)  # smaller tiles / more warps / explicit splits (the chains=2 rows of NOTES round 3
      #         ran at commit 74d9bf2, which has that kernel variant); all slower than the defaults
      timeout 200 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes int8_per_token_head \
        --imma 1 --configs 64:2:3,32:4:3,32:4:4,32:4:6,16:4:4,16:2:4,16:2:4:2,16:2:6:2,16:2:4:3,32:2:4:2,64:2:3 \
        --out "$OUT/tune3A.json" 2>&1 | tee "$OUT/tune3A.log"
      timeout 150 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes int8_per_token_head \
        --imma 1 --configs 128:2:2,32:2:4:1,32:2:4:2,64:2:3,64:2:3:2,64:4:3,32:4:4,32:4:4:2,128:2:2 \
        --out "$OUT/tune3B.json" 2>&1 | tee "$OUT/tune3B.log"
      timeout 100 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes fp8_per_token_head \
        --configs 64:2:3,32:4:4,16:2:4:2,16:4:4 --out "$OUT/tune3C.json" 2>&1 | tee "$OUT/tune3C.log"
      timeout 80 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes fp8_per_token_head \
        --configs 128:2:2,32:2:4:1,64:2:3,32:4:4 --out "$OUT/tune3D.json" 2>&1 | tee "$OUT/tune3D.log" ;;
    tune4)  # pipelining depth: num_stages <= 4 single-buffers K/V behind the block-table load
      timeout 150 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes int8_per_token_head,fp8_per_token_head \
        --imma 1 --configs 64:2:3,64:2:5,64:2:7,32:2:5,32:2:5:2,64:4:5,128:4:5,32:1:5:2,16:1:5:4 \
        --out "$OUT/tune4A.json" 2>&1 | tee "$OUT/tune4A.log"
      timeout 120 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes int8_per_token_head,fp8_per_token_head \
        --imma 1 --configs 128:2:2,128:2:5,64:2:5,64:2:5:2,32:2:5:2,128:4:5,64:1:5:2 \
        --out "$OUT/tune4B.json" 2>&1 | tee "$OUT/tune4B.log"
      timeout 90 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes bfloat16,fp8 \
        --configs 64:4:3,64:4:5,64:4:7,32:4:5,64:2:5,32:2:5 --out "$OUT/tune4C.json" 2>&1 | tee "$OUT/tune4C.log"
      timeout 90 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes bfloat16,fp8 \
        --configs 128:4:3,128:4:5,64:4:5,64:2:5,128:2:5 --out "$OUT/tune4D.json" 2>&1 | tee "$OUT/tune4D.log"
      timeout 90 $PY bench/tune_attention.py --shape 32,4096,16,4,256 --modes bfloat16,int8_per_token_head \
        --imma 1 --configs 32:4:3,32:4:5,64:4:5,64:8:5,32:2:5,16:2:5 --out "$OUT/tune4E.json" 2>&1 | tee "$OUT/tune4E.log" ;;
    tune5)  # 8-bit V converted in registers (v_reg) with double-buffered K/V (num_stages 5)
      timeout 200 $PY bench/tune_attention.py --shape 64,4096,32,8,128 --modes int8_per_token_head,fp8_per_token_head,fp8 \
        --imma 1 --vreg 0,1 --configs 64:2:3,64:2:5,32:2:5:2,64:4:5,32:1:5:2 --maxnreg 0,168 \
        --out "$OUT/tune5A.json" 2>&1 | tee "$OUT/tune5A.log"
      timeout 150 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes int8_per_token_head,fp8_per_token_head,fp8 \
        --imma 1 --vreg 0,1 --configs 128:2:2,128:2:5,64:2:5,64:4:5,128:4:5 \
        --out "$OUT/tune5B.json" 2>&1 | tee "$OUT/tune5B.log"
      timeout 80 $PY bench/tune_attention.py --shape 32,4096,16,4,256 --modes int8_per_token_head,fp8_per_token_head \
        --imma 1 --vreg 0,1 --configs 32:2:3,32:2:5,32:4:5,16:2:5 --out "$OUT/tune5E.json" 2>&1 | tee "$OUT/tune5E.log" ;;
    tune6)  # the v_window rows of NOTES round 4 ran at commit 8e9165b (variant reverted after)
      echo "tune6 needs commit 8e9165b (v_window)" ;;
    round8)  # Gluon (copy ring / register prefetch) against the Triton kernel, both at their defaults
      for shape in 64,4096,32,8,128 128,2048,64,8,64 16,16384,32,8,128 4,32768,32,8,128 32,4096,16,4,256 64,1024,32,8,128; do
        timeout 70 $PY bench/tune_attention.py --modes int8_per_token_head,fp8_per_token_head --imma 1 \
          --kernel triton,gluon --pipe 0,2 --shape $shape --configs 0:0:0:0 2>&1 | tee -a "$OUT/round8.log"
      done ;;
    round9)  # the Gluon kernel with swapped operands against the round-8 Gluon kernel, defaults
      for shape in 64,4096,32,8,128 128,2048,64,8,64 16,16384,32,8,128 4,32768,32,8,128 32,4096,16,4,256 64,1024,32,8,128; do
        timeout 70 $PY bench/tune_attention.py --modes int8_per_token_head,fp8_per_token_head \
          --kernel gluon --pipe 2 --swap 0,1 --shape $shape --configs 0:0:0:0 2>&1 | tee -a "$OUT/round9.log"
      done ;;
    suite)
      timeout 400 $PY bench/bench_attention.py --out "$OUT/suite.json" --plot "$OUT/suite.png" \
        2>&1 | tee "$OUT/suite.log" ;;
    round12)  # per-program timelines of the swapped-operand kernel; Nsight Compute on the write
      #           and decode kernels (memory traffic, stalls, per-SM active cycles)
      timeout 200 $PY bench/trace_decode.py --shape 64,4096,32,8,128 --shape 128,2048,32,8,128 \
        --shape 128,4096,32,8,128 --splits 1,2 --out "$OUT/trace-d128.json" 2>&1 | tee "$OUT/trace.log"
      NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats"
      MET=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max
      for m in fp8 int8_per_token_head fp8_per_token_head bfloat16; do
        timeout 100 $NCU --metrics $MET -k regex:_write_kv_kernel --launch-skip 2 --launch-count 1 \
          $PY bench/profile_once.py write --mode $m 2>&1 | tee -a "$OUT/ncu-write.log"
      done
      timeout 150 $NCU --metrics $MET -k regex:_gluon_swap_kernel --launch-skip 1 --launch-count 1 \
        $PY bench/profile_once.py decode 2>&1 | tee -a "$OUT/ncu-decode.log" ;;
    round12c)  # writes with fewer instructions per element (A/B against $OLD_WRITE, a copy of
      #            an earlier kvplan/runtime/write.py, when given) and the GPU tests they touch
      for rep in 1 2; do
        if [ -n "$OLD_WRITE" ]; then
          cp kvplan/runtime/write.py /tmp/write_new.py; cp "$OLD_WRITE" kvplan/runtime/write.py
          echo "== old write kernel" | tee -a "$OUT/write-ab.log"
          timeout 60 $PY bench/bench_write.py --tokens 8192,32768 2>&1 | tee -a "$OUT/write-ab.log"
          cp /tmp/write_new.py kvplan/runtime/write.py
        fi
        echo "== new write kernel" | tee -a "$OUT/write-ab.log"
        timeout 60 $PY bench/bench_write.py --tokens 8192,32768 2>&1 | tee -a "$OUT/write-ab.log"
      done
      timeout 200 $PY -m pytest -q -p no:cacheprovider tests/runtime/test_write.py \
        tests/runtime/test_attention.py -k "write or swap_matches or dependent_launch or default" 2>&1 \
        | tail -15 | tee "$OUT/pytest.log" ;;
    round12d)  # the Gluon per-token-head write kernel against the Triton one, its launch sweep
      #            and the write tests
      M=int8_per_token_head,fp8_per_token_head
      for rep in 1 2; do
        timeout 60 $PY bench/bench_write.py --modes $M --tokens 8192,32768 --kernel triton,gluon \
          2>&1 | tee -a "$OUT/write-gluon.log"
      done
      timeout 90 $PY bench/bench_write.py --modes $M --tokens 8192 --kernel gluon --rows 16,32,64 \
        --warps 4 2>&1 | tee -a "$OUT/write-gluon.log"
      timeout 90 $PY bench/bench_write.py --modes $M --tokens 8192 --kernel gluon --rows 8,16,32 \
        --warps 2 2>&1 | tee -a "$OUT/write-gluon.log"
      timeout 60 $PY bench/bench_write.py --modes $M --tokens 8192 --kernel gluon --rows 4,8 \
        --warps 1 2>&1 | tee -a "$OUT/write-gluon.log"
      timeout 200 $PY -m pytest -q -p no:cacheprovider tests/runtime/test_write.py 2>&1 \
        | tail -15 | tee "$OUT/pytest-write.log" ;;
    round14)  # issue 22: eager launch cost, prefill kernel sweeps (fused and two-pass)
      timeout 120 $PY bench/launch_cost.py --shape 8,8192,32,8,128 --shape 64,1024,32,8,128 \
        --shape 128,2048,64,8,64 2>&1 | tee "$OUT/launch.log"
      timeout 330 $PY bench/tune_prefill.py --shape 4,4096,0,32,8,128 --modes bf16,int8_per_token_head \
        --configs 128:128:8:3,128:128:8:2,128:64:8:2,128:32:4:3,128:32:4:2,128:64:4:2,128:32:4:4,64:64:4:3,64:128:4:3,64:32:4:3,64:64:4:2,256:64:8:2 \
        --rep-ms 60 2>&1 | tee "$OUT/tune-prefill-a.log"
      timeout 300 $PY bench/tune_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes int8_per_token_head,fp8_per_token_head,fp8 \
        --configs 128:32:4:2:0:1,256:64:8:2:0:1,64:128:4:3,64:128:4:2,64:128:4:3:1,128:128:4:2 \
        --rep-ms 60 2>&1 | tee "$OUT/tune-prefill-b.log"
      timeout 120 $PY bench/tune_prefill.py --shape 2,2048,16384,64,8,64 --modes bf16,int8_per_token_head \
        --configs 128:64:8:3:0:1,128:64:8:2,128:128:8:2,256:64:8:2 --rep-ms 60 2>&1 \
        | tee "$OUT/tune-prefill-c.log" ;;
    round15)  # issue 22: host time per eager call (idle vs queued, profile), B1 ctx32K split
      #          counts, FP8 per-tensor launch settings at the suite shapes, launch-cache tests
      timeout 150 $PY bench/launch_cost.py --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 \
        --shape 1,32768,32,8,128 --shape 128,2048,64,8,64 2>&1 | tee "$OUT/launch.log"
      timeout 60 $PY bench/launch_cost.py --shape 16,16384,32,8,128 --modes int8_per_token_head,bf16 \
        --profile 2>&1 | tee "$OUT/launch-profile.log"
      timeout 100 $PY bench/tune_attention.py --shape 1,32768,32,8,128 \
        --modes int8_per_token_head,fp8_per_token_head --kernel gluon --pipe 2 \
        --configs 16:1:2:0,16:1:2:32,16:1:2:48,16:1:2:64,16:1:2:96,16:1:2:128 2>&1 | tee "$OUT/b1.log"
      for sh in 16,16384,32,8,128 4,32768,32,8,128; do
        timeout 90 $PY bench/tune_attention.py --shape $sh --modes fp8 --vreg 1 \
          --configs 64:2:5:0,64:2:5:2,64:2:5:4,64:2:5:6,64:2:5:8,64:2:3:0,64:4:3:0,64:2:3:8,32:2:5:8,64:4:3:8 \
          2>&1 | tee -a "$OUT/fp8t.log"
      done
      timeout 60 $PY bench/tune_attention.py --shape 64,2048,32,8,128 --modes fp8 --vreg 1 \
        --configs 64:2:5:0,64:2:5:1,64:2:5:2,64:2:5:3,64:2:3:0,64:4:3:0,64:4:3:2 2>&1 | tee -a "$OUT/fp8t.log"
      timeout 90 $PY bench/tune_attention.py --shape 128,2048,64,8,64 --modes fp8 --vreg 1,0 \
        --configs 128:2:2:0,64:2:3:0,64:2:5:0,128:4:2:0,64:4:3:0,128:2:3:0,32:2:5:0 2>&1 | tee -a "$OUT/fp8t.log"
      timeout 90 $PY bench/tune_attention.py --shape 32,4096,16,4,256 --modes fp8 --vreg 1,0 \
        --configs 32:2:3:0,32:2:5:0,32:4:3:0,64:4:3:0,32:2:4:0,16:2:5:0 2>&1 | tee -a "$OUT/fp8t.log"
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE tests/runtime/test_attention.py \
        -k "cached_launch or specializes or split or dependent" 2>&1 | tail -15 | tee "$OUT/pytest.log" ;;
    round15b)  # host time before/after (.old: a copy of the package with the previous commit's
      #           attention.py and _common.py, and bench/launch_cost.py), B1 ctx32K
      #           variants, B16 ctx16K split counts for the Triton kernel
      for v in old new; do
        if [ $v = old ]; then P=.old; else P=.; fi
        echo "== $v" | tee -a "$OUT/launch.log"
        PYTHONPATH=$P timeout 120 $PY $P/bench/launch_cost.py --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 \
          --shape 1,32768,32,8,128 2>&1 | tee -a "$OUT/launch.log"
      done
      timeout 100 $PY bench/tune_attention.py --shape 1,32768,32,8,128 \
        --modes int8_per_token_head --kernel gluon --pipe 2,3,4 \
        --configs 16:1:2:0,16:1:2:96,32:1:2:64,32:1:2:128 2>&1 | tee "$OUT/b1.log"
      timeout 60 $PY bench/tune_attention.py --shape 1,32768,32,8,128 --modes fp8_per_token_head \
        --kernel gluon --pipe 2 --configs 16:1:2:0 2>&1 | tee -a "$OUT/b1.log"
      timeout 100 $PY bench/tune_attention.py --shape 16,16384,32,8,128 --modes bfloat16,fp8 --vreg 1 \
        --configs 64:4:3:0,64:4:3:37,64:4:3:4,64:2:5:0,64:2:5:37 2>&1 | tee "$OUT/b16.log"
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE tests/runtime/test_attention.py \
        -k "cached_launch or specializes or split or dependent or merge or swap" 2>&1 | tail -15 | tee "$OUT/pytest.log" ;;
    round15suite)  # round 15's suite run, after the launch floor of this host
      timeout 40 $PY bench/launch_cost.py --floor --shape 1,32768,32,8,128 --modes int8_per_token_head \
        2>&1 | tee "$OUT/floor.log"
      timeout 540 $PY bench/bench_attention.py --out "$OUT/h100-runtime-r15-2026-11-25.json" \
        --plot "$OUT/h100-runtime-r15-2026-11-25.png" 2>&1 | tee "$OUT/h100-runtime-r15-2026-11-25.log" ;;
    round15tests)  # every GPU test of tests/runtime but the prefill ones (round15prefill)
      timeout 570 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime -k "not prefill" 2>&1 \
        | tee "$OUT/pytest.log" ;;
    round15prefill)  # the prefill GPU tests, and the Gluon decode tests again (after the ring fix)
      timeout 570 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime \
        -k "prefill or test_gluon_decode_matches_reference" 2>&1 | tee "$OUT/pytest-prefill.log" ;;
    round15c)  # B1 ctx32K: more programs than 7.75 per SM (explicit split counts)
      timeout 150 $PY bench/tune_attention.py --shape 1,32768,32,8,128 \
        --modes int8_per_token_head,fp8_per_token_head --kernel gluon --pipe 2 \
        --configs 16:1:2:0,16:1:2:160,16:1:2:192,16:1:2:256,16:1:2:128 2>&1 | tee "$OUT/b1c.log"
      timeout 60 $PY bench/tune_attention.py --shape 2,32768,32,8,128 --modes int8_per_token_head \
        --kernel gluon --pipe 2 --configs 16:1:2:0,16:1:2:96,16:1:2:128 2>&1 | tee -a "$OUT/b1c.log" ;;
    round16)  # issue 22: the FP8 per-tensor Gluon kernel against the Triton kernel (its round-15
      #          defaults, v_reg on) at the suite shapes, 16/32-key tiles, 2/3 stages; its GPU tests
      for shape in 64,4096,32,8,128 16,16384,32,8,128 128,2048,64,8,64 64,1024,32,8,128 \
                   64,2048,32,8,128 4,32768,32,8,128 32,4096,16,4,256 1,32768,32,8,128; do
        timeout 60 $PY bench/tune_attention.py --shape $shape --modes fp8 --vreg 1 \
          --configs 0:0:0:0 2>&1 | tee -a "$OUT/fp8t.log"
        timeout 90 $PY bench/tune_attention.py --shape $shape --modes fp8 --kernel gluon \
          --pipe 2,3 --configs 16:1:2:0,32:1:2:0 2>&1 | tee -a "$OUT/fp8t.log"
      done
      timeout 300 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "fp8t or test_decode_default_on_gpu or default_decode_kernel_choice" 2>&1 \
        | tee "$OUT/pytest-fp8t.log" ;;
    round16b)  # the FP8 per-tensor Gluon kernel with two kv heads per program (rows of 2 x head
      #           contiguous bytes) against one, and the Triton kernel; its GPU tests
      for shape in 64,4096,32,8,128 16,16384,32,8,128 64,1024,32,8,128 64,2048,32,8,128 \
                   4,32768,32,8,128 32,4096,16,4,256 1,32768,32,8,128; do
        timeout 40 $PY bench/tune_attention.py --shape $shape --modes fp8 --vreg 1 \
          --configs 0:0:0:0 2>&1 | tee -a "$OUT/fp8t-hp.log"
        timeout 70 $PY bench/tune_attention.py --shape $shape --modes fp8 --kernel gluon \
          --pipe 2 --hp 1,2 --configs 16:1:2:0,32:1:2:0 2>&1 | tee -a "$OUT/fp8t-hp.log"
      done
      timeout 240 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "fp8t" 2>&1 | tee "$OUT/pytest-fp8t.log" ;;
    round16c)  # Nsight Compute: the FP8 per-tensor Gluon kernel (heads 128 and 64) against the
      #           INT8 per-token-head Gluon kernel and the Triton FP8 per-tensor kernel: DRAM and
      #           L2 traffic, shared-memory wavefronts and bank conflicts, stall reasons
      NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy"
      MET=dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed.sum,sm__cycles_active.avg,gpu__time_duration.sum
      for spec in "_gluon_fp8t_kernel fp8 64,4096,32,8,128 gluon" "_gluon_fp8t_kernel fp8 128,2048,64,8,64 gluon" \
                  "_gluon_swap_kernel int8_per_token_head 64,4096,32,8,128 gluon" \
                  "_paged_attention_kernel fp8 64,4096,32,8,128 triton"; do
        set -- $spec
        echo "== $spec" | tee -a "$OUT/ncu-fp8t.log"
        timeout 100 $NCU --metrics $MET -k regex:$1 --launch-skip 1 --launch-count 1 \
          $PY bench/profile_once.py decode --mode $2 --shape $3 --kernel $4 2>&1 \
          | grep -v "^==PROF==" | tee -a "$OUT/ncu-fp8t.log"
      done ;;
    round16d)  # the FP8 per-tensor Gluon kernel with whole-row copy lanes and XOR-swizzled row
      #           buffers against the Triton kernel; its GPU tests at three head/group shapes
      for shape in 64,4096,32,8,128 16,16384,32,8,128 128,2048,64,8,64 64,1024,32,8,128 \
                   64,2048,32,8,128 4,32768,32,8,128 32,4096,16,4,256 1,32768,32,8,128; do
        timeout 40 $PY bench/tune_attention.py --shape $shape --modes fp8 --vreg 1 \
          --configs 0:0:0:0 2>&1 | tee -a "$OUT/fp8t-swz.log"
        timeout 70 $PY bench/tune_attention.py --shape $shape --modes fp8 --kernel gluon \
          --pipe 2 --hp 1,2 --configs 16:1:2:0,32:1:2:0 2>&1 | tee -a "$OUT/fp8t-swz.log"
      done
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "fp8t_window or (fp8t_matches and 128-32-8) or (fp8t_matches and 64-64-8) or (fp8t_matches and 256-16-4)" \
        2>&1 | tee "$OUT/pytest-fp8t.log" ;;
    round16suite)  # round 16's suite run, then the GPU tests the round touches: the FP8
      #               per-tensor Gluon tests round16d did not run, the decode defaults, the cached
      #               launches, the split-K merges and the suite's own timing path
      timeout 220 $PY bench/bench_attention.py --out "$OUT/h100-runtime-r16-2026-11-25.json" \
        --plot "$OUT/h100-runtime-r16-2026-11-25.png" 2>&1 | tee "$OUT/h100-runtime-r16-2026-11-25.log"
      timeout 360 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_bench.py -k "(fp8t_matches and (128-8-8 or 64-28-4 or 128-12-2)) or decode_default_on_gpu or default_decode_kernel_choice or heads_per_program or cached_launch or split or dependent or bench_decode_shape" \
        2>&1 | tee "$OUT/pytest.log" ;;
    round17)  # issue 22: the Hopper prefill kernel's GPU tests, then it against the Triton
      #          prefill kernel and SDPA at the suite's prefill shapes (split / joined consumers)
      timeout 230 $PY -m pytest -p no:cacheprovider -q -x -rfE -m gpu tests/runtime/test_attention.py \
        -k "hopper" 2>&1 | tee "$OUT/pytest-hopper.log"
      timeout 300 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --shape 2,2048,16384,64,8,64 --modes bf16,int8_per_token_head,fp8 \
        --settings triton,split=1,split=0 2>&1 | tee "$OUT/tune-hopper.log" ;;
    round17b)  # ping-pong turns and persistent programs against round17's kernel, head-64 ring
      #           depth; then the GPU tests over every setting
      timeout 280 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --shape 2,2048,16384,64,8,64 --modes bf16,int8_per_token_head \
        --settings triton,split=1,split=1:pingpong=1,split=1:persistent=1,split=1:pingpong=1:persistent=1 \
        2>&1 | tee "$OUT/tune-hopper-b.log"
      timeout 60 $PY bench/tune_hopper_prefill.py --shape 2,2048,16384,64,8,64 --modes bf16 \
        --settings split=1:stages=3,split=1:stages=4,split=1:stages=3:pingpong=1 2>&1 | tee "$OUT/tune-hopper-c.log"
      timeout 230 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "hopper" 2>&1 | tee "$OUT/pytest-hopper.log" ;;
    round17c)  # the query prefetch / deferred output store, then every Hopper-kernel GPU test
      #           and the prefill GPU tests (which now run it by default)
      timeout 200 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --shape 2,2048,16384,64,8,64 --modes bf16,int8_per_token_head \
        --settings triton,persistent=0:prefetch=0,persistent=1:prefetch=0,persistent=1,persistent=1:pingpong=1 \
        2>&1 | tee "$OUT/tune-hopper-d.log"
      timeout 330 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "hopper or prefill_kernel_gpu" 2>&1 | tee "$OUT/pytest-hopper.log" ;;
    round17suite)  # round 17's suite run (the Hopper prefill kernel by default on sm_90), then
      #               the Hopper-kernel GPU tests at the default and the joined 8-warp settings
      timeout 280 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r17-2026-11-28.json" \
        --plot "$OUT/h200-runtime-r17-2026-11-28.png" 2>&1 | tee "$OUT/h200-runtime-r17-2026-11-28.log"
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_attention.py \
        -k "hopper_gpu and (True-2-False-True-True or False-2-False-False-False)" 2>&1 | tee "$OUT/pytest.log" ;;
    round18)  # issue 22: bound eager decode launches (kvplan.runtime.bound): host time per call,
      #         bound against the ordinary path, at the suite's decode shapes; the launch
      #         floor; a profile; then the bound-path, launch-cache and decode GPU tests
      timeout 240 $PY bench/launch_cost.py --floor --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 \
        --shape 128,2048,64,8,64 --shape 64,1024,32,8,128 --shape 4,32768,32,8,128 \
        --shape 32,4096,16,4,256 --shape 1,32768,32,8,128 2>&1 | tee "$OUT/launch.log"
      timeout 60 $PY bench/launch_cost.py --shape 16,16384,32,8,128 --modes int8_per_token_head \
        --profile 2>&1 | tee "$OUT/launch-profile.log"
      timeout 280 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bound.py -k "bound or cached_launch or decode" 2>&1 | tee "$OUT/pytest.log" ;;
    round18b)  # the bound-path GPU tests first (round18's test step ran out of time before them),
      #          then where a bound split-K call's host time goes (--parts)
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "bound_decode or cached_launch" 2>&1 | tee "$OUT/pytest-bound.log"
      timeout 150 $PY bench/launch_cost.py --parts --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 \
        --shape 1,32768,32,8,128 --modes bf16,fp8_per_tensor,int8_per_token_head,fp8_per_token_head \
        2>&1 | tee "$OUT/launch-parts.log" ;;
    round18suite)  # per-stream scratch: the bound-path tests, host time at the suite's decode
      #              shapes (bound and ordinary), then round 18's suite run
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bound.py -k "bound or cached_launch" 2>&1 | tee "$OUT/pytest-bound.log"
      timeout 150 $PY bench/launch_cost.py --floor --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 \
        --shape 128,2048,64,8,64 --shape 64,1024,32,8,128 --shape 4,32768,32,8,128 \
        --shape 32,4096,16,4,256 --shape 1,32768,32,8,128 2>&1 | tee "$OUT/launch.log"
      timeout 290 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r18-2026-11-28.json" \
        --plot "$OUT/h200-runtime-r18-2026-11-28.png" 2>&1 | tee "$OUT/h200-runtime-r18-2026-11-28.log" ;;
    round18c)  # the Hopper prefill kernel through launch_cached: its GPU tests at the default
      #          settings, eager and host time of both prefill kernels at small prompts (the
      #          size threshold), B1 ctx32K split counts on this card, then the decode, write
      #          and bench GPU tests on this round's code
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "hopper_gpu and True-2-False-True-True" 2>&1 | tee "$OUT/pytest-hopper.log"
      timeout 100 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,1024,0,32,8,128 --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 \
        --prefill 1,4096,0,32,8,128 2>&1 | tee "$OUT/launch-prefill.log"
      timeout 60 $PY bench/tune_attention.py --shape 1,32768,32,8,128 --modes int8_per_token_head \
        --kernel gluon --pipe 2 --configs 16:1:2:0,16:1:2:96,16:1:2:128,16:1:2:160,16:1:2:192 \
        2>&1 | tee "$OUT/b1.log"
      timeout 190 $PY -m pytest -p no:cacheprovider -q -rfE -x tests/runtime/test_write.py \
        tests/runtime/test_bench.py tests/runtime/test_attention.py -k "write or bench or gluon or split or dependent" \
        2>&1 | tee "$OUT/pytest.log" ;;
    round18d)  # round18c's test step again without -x (a CPU-device test stopped it there;
      #          fixed), then where an eager prefill call's host time goes
      timeout 290 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_write.py \
        tests/runtime/test_bench.py tests/runtime/test_attention.py -k "write or bench or gluon or split or dependent" \
        2>&1 | tee "$OUT/pytest.log"
      timeout 60 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,2048,0,32,8,128 \
        --profile 2>&1 | tee "$OUT/launch-prefill-profile.log" ;;
    round18e)  # the workspace's block table built once per size: the GPU tests it touches and the
      #          bound path again, then the eager prefill table of round18c
      timeout 100 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bench.py -k "workspace_holds or bound_decode or prefill_problem" \
        2>&1 | tee "$OUT/pytest.log"
      timeout 100 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,1024,0,32,8,128 --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 \
        --prefill 1,4096,0,32,8,128 2>&1 | tee "$OUT/launch-prefill.log" ;;
    round19)  # issue 22: the split-K merge inside the decode kernels (the last split merges)
      #         against the merge kernel: GPU tests, then both at the suite's split shapes
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "fused_merge or split_merge or bound_decode or plans_stay_bounded or cached_launch or workspace_holds or dependent_launch" \
        2>&1 | tee "$OUT/pytest.log"
      for shape in 64,4096,32,8,128 16,16384,32,8,128 64,1024,32,8,128 32,4096,16,4,256 \
                   4,32768,32,8,128 1,32768,32,8,128; do
        timeout 100 $PY bench/tune_attention.py --shape $shape --kernel gluon --configs 0:0:0 \
          --modes int8_per_token_head,fp8_per_token_head,fp8 --merge fused,kernel 2>&1 \
          | tee -a "$OUT/merge.log"
        timeout 40 $PY bench/tune_attention.py --shape $shape --kernel triton --configs 0:0:0 \
          --modes bfloat16 --merge fused,kernel 2>&1 | tee -a "$OUT/merge.log"
      done ;;
    round19b)  # host time per eager call with the merge fused against the merge kernel, then
      #          FP8 per-tensor decode: 32-row tiles and deeper rings at the shapes under 90%
      for merge in kernel fused; do
        timeout 120 $PY bench/launch_cost.py --merge $merge --modes bf16,fp8_per_tensor,int8_per_token_head \
          --shape 64,4096,32,8,128 --shape 16,16384,32,8,128 --shape 64,1024,32,8,128 \
          2>&1 | tee -a "$OUT/launch-merge.log"
      done
      for shape in 128,2048,64,8,64 64,1024,32,8,128 64,2048,32,8,128 32,4096,16,4,256; do
        timeout 80 $PY bench/tune_attention.py --shape $shape --kernel gluon --modes fp8 \
          --configs 16:0:0,32:0:0 --pipe 2,3,4 2>&1 | tee -a "$OUT/fp8t.log"
      done
      timeout 60 $PY bench/tune_attention.py --shape 4,32768,32,8,128 --kernel gluon --modes fp8 \
        --configs 16:0:0,32:0:0 --pipe 2,3 --hp 1,2 2>&1 | tee -a "$OUT/fp8t.log" ;;
    round19suite)  # the GPU tests round 19 touches (FP8 per-tensor kernel at its new head-64
      #              ring, the fused merge, bound calls), then round 19's suite run
      timeout 170 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bound.py -k "fp8t or fused_merge or split_merge or bound or dependent_launch" \
        2>&1 | tee "$OUT/pytest.log"
      timeout 370 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r19-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r19-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r19-2026-11-29.log" ;;
    round20)  # INT4 prefill with the workspace rotated back in the dequantize pass (no query or
      #         output rotation), with the GPU tests it touches and round 19's unrun merge change
      timeout 300 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "int4 or workspace or split_merge or fused_merge or merge_kernel" 2>&1 | tee "$OUT/pytest.log"
      for shape in 4,4096,0,32,8,128 4,512,8192,32,8,128 2,2048,16384,64,8,64; do
        timeout 90 $PY bench/tune_prefill.py --shape $shape \
          --modes bf16,int8_per_token_head,int4_per_token_head 2>&1 | tee -a "$OUT/int4-prefill.log"
      done ;;
    round20b)  # INT4 decode with the rotations inside the kernel (and bound launches), A/B
      #          against the tree before it (.ab/old: `git archive 6303681 kvplan bench | tar -x -C
      #          .ab/old`, then this round's bench/launch_cost.py copied in)
      timeout 240 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "int4 or bound_decode" 2>&1 | tee "$OUT/pytest-b.log"
      for tree in .ab/old .; do
        for shape in 64,4096,32,8,128 1,32768,32,8,128 128,2048,64,8,64; do
          timeout 60 $PY $tree/bench/tune_attention.py --shape $shape --modes int4_per_token_head \
            --configs 0:0:0 2>&1 | grep -v BEST | tee -a "$OUT/int4-decode.log"
        done
        timeout 90 $PY $tree/bench/launch_cost.py --modes int4_per_token_head --shape 64,4096,32,8,128 \
          --shape 8,8192,32,8,128 --shape 1,32768,32,8,128 2>&1 | tee -a "$OUT/int4-decode.log"
      done ;;
    round20suite)  # INT4 writes rotated in the write kernel: GPU tests, A/B against the tree
      #              before (.ab/old), then round 20's suite run (INT4 decode rows added)
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_write.py \
        tests/runtime/test_bench.py -k "int4 or hadamard or decode_shape or prefill_shape" \
        2>&1 | tee "$OUT/pytest-c.log"
      for tree in .ab/old .; do
        timeout 60 $PY $tree/bench/bench_write.py --tokens 64,1024,8192 \
          --modes int4_per_token_head,int8_per_token_head 2>&1 | tee -a "$OUT/int4-write.log"
      done
      timeout 380 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r20-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r20-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r20-2026-11-29.log" ;;
    round20d)  # writes through the compiled-kernel cache (launch_cached): GPU write tests, then
      #          eager write calls against the tree before (.ab/old)
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_write.py \
        2>&1 | tee "$OUT/pytest-d.log"
      for tree in .ab/old . .ab/old .; do
        timeout 60 $PY $tree/bench/bench_write.py --tokens 64,1024,8192 \
          --modes bfloat16,fp8,int8_per_token_head,int4_per_token_head 2>&1 | tee -a "$OUT/write-launch.log"
      done ;;
    round20e)  # host time of eager writes, the tree before (.ab/old) and this one, twice each
      for tree in .ab/old . .ab/old .; do
        echo "tree $tree" | tee -a "$OUT/write-host.log"
        timeout 60 $PY $tree/bench/launch_cost.py --write 64 --write 1024 \
          --modes bf16,fp8_per_tensor,int8_per_token_head,int4_per_token_head 2>&1 | tee -a "$OUT/write-host.log"
      done ;;
    round20f)  # INT4 nibbles to fp16 by integer ops (U4X4_TO_F16) in the Triton decode kernel:
      #          GPU tests, then A/B against the tree before it (.ab/prev: `git archive 4083f91
      #          kvplan bench | tar -x -C .ab/prev`)
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "int4 and not prefill_kernel" 2>&1 | tee "$OUT/pytest-f.log"
      for tree in .ab/prev . .ab/prev .; do
        for shape in 64,4096,32,8,128 1,32768,32,8,128 128,2048,64,8,64 32,4096,16,4,256; do
          timeout 60 $PY $tree/bench/tune_attention.py --shape $shape --modes int4_per_token_head \
            --configs 0:0:0 2>&1 | grep -v BEST | tee -a "$OUT/int4-u4.log"
        done
      done ;;
    round20g)  # INT4 decode launch settings on the Triton kernel after the U4X4 conversion
      for shape in 64,4096,32,8,128 1,32768,32,8,128; do
        timeout 90 $PY bench/tune_attention.py --shape $shape --modes int4_per_token_head \
          --configs 32:2:3,64:2:3,128:2:3,64:4:3,128:4:3,64:2:4,64:1:3,32:1:3 2>&1 | tee -a "$OUT/int4-tune.log"
      done
      for shape in 128,2048,64,8,64 32,4096,16,4,256; do
        timeout 90 $PY bench/tune_attention.py --shape $shape --modes int4_per_token_head \
          --configs 128:2:2,64:2:2,64:2:3,128:4:2,32:2:3,64:4:3,32:4:3,16:2:3 2>&1 | tee -a "$OUT/int4-tune.log"
      done ;;
    round20suite2)  # after the INT4 nibble conversion and launch defaults: INT4 GPU tests, then
      #               the suite again
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bench.py -k "(int4 and not prefill_kernel) or decode_shape" \
        2>&1 | tee "$OUT/pytest-g.log"
      timeout 300 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r20b-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r20b-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r20b-2026-11-29.log" ;;
    round20h)  # write plans per cache: GPU write tests, then host time of eager writes against
      #          the tree before (.ab/prev, with this round's bench/launch_cost.py copied in)
      timeout 100 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_write.py \
        2>&1 | tee "$OUT/pytest-h.log"
      for tree in .ab/prev . .ab/prev .; do
        echo "tree $tree" | tee -a "$OUT/write-plan-host.log"
        timeout 40 $PY $tree/bench/launch_cost.py --write 64 \
          --modes bf16,int8_per_token_head,int4_per_token_head 2>&1 | tee -a "$OUT/write-plan-host.log"
      done ;;
    round21)  # GPU write tests after the two write kernels' launch fold into _common.row_writer
      #         (round 20's last change, run in the interpreter only), with the bound decode tests
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_write.py \
        tests/runtime/test_attention.py -k "write or bound" 2>&1 | tee "$OUT/pytest-21.log" ;;
    round21b)  # INT4 decode on the swapped-operand Gluon kernel: the probe against the reference,
      #          GPU tests, then tile sweeps against the Triton kernel (the INT4 default so far)
      timeout 150 $PY bench/int4_probe.py 2>&1 | tee "$OUT/probe.log"
      timeout 240 $PY -m pytest -p no:cacheprovider -q -rfE -x tests/runtime/test_attention.py \
        -k "int4 and (gluon or split_merge)" 2>&1 | tail -30 | tee "$OUT/pytest-21b.log"
      for shape in 64,4096,32,8,128 1,32768,32,8,128 128,2048,64,8,64 32,4096,16,4,256 \
          16,16384,32,8,128; do
        timeout 40 $PY bench/tune_attention.py --shape $shape --modes int4_per_token_head,int8_per_token_head \
          --configs 0:0:0 2>&1 | grep -v BEST | tee -a "$OUT/int4-gluon.log"
        timeout 90 $PY bench/tune_attention.py --shape $shape --modes int4_per_token_head \
          --kernel gluon --configs 16:1:2,32:1:2 --pipe 2,3,4 2>&1 | tee -a "$OUT/int4-gluon.log"
      done ;;
    round21c)  # INT4 decode on Gluon by default: GPU tests (INT4, default choice, bound calls),
      #          eager host time, then the suite
      timeout 240 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bench.py -k "int4 or default_on_gpu or default_decode_kernel or bound_decode or decode_shape" \
        2>&1 | tail -30 | tee "$OUT/pytest-21c.log"
      timeout 60 $PY bench/launch_cost.py --modes int4_per_token_head,int8_per_token_head \
        --shape 64,4096,32,8,128 --shape 8,8192,32,8,128 --shape 1,32768,32,8,128 2>&1 | tee "$OUT/int4-host.log"
      timeout 330 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r21-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r21-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r21-2026-11-29.log" ;;
    round21d)  # the GPU tests round21c's 240 s did not reach: node ids in the file $TESTS, made by
      #          pytest -o addopts="" --collect-only -q <round21c's files and -k> | grep :: | tail -n +74
      timeout 420 $PY -m pytest -p no:cacheprovider -q -rfE $(cat "$TESTS") 2>&1 | tail -30 \
        | tee "$OUT/pytest-21d.log" ;;
    round21e)  # whole-prompt prefill (unchanged this round) measured again beside SDPA, three
      #          times in one machine: the suite run of round21c read SDPA 10% faster than round 20
      for i in 1 2 3; do
        timeout 90 $PY bench/tune_prefill.py --shape 4,4096,0,32,8,128 \
          --modes bf16,int8_per_token_head 2>&1 | tee -a "$OUT/prefill-again.log"
      done ;;
    round21f)  # the bf16 whole prompt against a 608 TFLOP/s SDPA: register split and cap of the
      #          Hopper prefill kernel, and block sizes 16/32/64 (8/4/2 TMA box copies per
      #          128-key tile and side)
      for bs in 16 32 64; do
        timeout 150 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --modes bf16 \
          --block-size $bs --settings split=1,consumer_regs=232,consumer_regs=248,maxnreg=160,maxnreg=176,prefetch=0 \
          2>&1 | tee -a "$OUT/prefill-sweep.log"
      done ;;
    round21g)  # (the setting was removed in round 22) the Hopper prefill kernel's query prefetch on and off, alternating, three times,
      #          whole prompt and chunk, bf16 and the INT8 workspace
      timeout 280 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes bf16,int8_per_token_head --settings prefetch=1,prefetch=0,prefetch=1,prefetch=0,prefetch=1,prefetch=0 \
        2>&1 | tee -a "$OUT/prefill-prefetch.log" ;;
    round21h)  # the Hopper prefill kernel's new default (query prefetch off): its GPU tests
      timeout 260 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "(prefill_hopper_gpu and True-2-False-True-False) or prefill_workspace or dispatch_to_the_hopper" \
        2>&1 | tail -30 | tee "$OUT/pytest-21h.log" ;;
    round22)  # the Hopper prefill kernel's query rows by TMA from the producer: its GPU tests at
      #          the default settings and with the consumers' register loads (qtma off)
      timeout 280 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "(prefill_hopper_gpu and (True-2-False-True-False-True or True-2-False-True-True-False)) or prefill_workspace or dispatch_to_the_hopper" \
        2>&1 | tail -30 | tee "$OUT/pytest-22.log" ;;
    round22b)  # query by TMA on and off, alternating, three times: whole prompt and chunk at head
      #          128, bf16 and the INT8 workspace; the head-64 chunk
      timeout 200 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes bf16,int8_per_token_head --settings qtma=0,qtma=1,qtma=0,qtma=1,qtma=0,qtma=1 \
        2>&1 | tee -a "$OUT/prefill-qtma.log"
      timeout 100 $PY bench/tune_hopper_prefill.py --shape 2,2048,16384,64,8,64 --shape 2,2048,0,16,4,256 \
        --modes bf16 --settings qtma=0,qtma=1,qtma=0,qtma=1 \
        2>&1 | tee -a "$OUT/prefill-qtma.log" ;;
    round22c)  # the rest of the Hopper prefill kernel's GPU tests (other settings); the final
      #          build's query by TMA on and off
      timeout 320 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu and not True-2-False-True-False-True and not True-2-False-True-True-False" \
        2>&1 | tail -30 | tee "$OUT/pytest-22c.log"
      timeout 80 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --modes bf16,int8_per_token_head \
        --settings qtma=0,qtma=1,qtma=0,qtma=1 2>&1 | tee -a "$OUT/prefill-final.log" ;;
    round22d)  # page rows held whole by every producer lane (no reductions): the default-setting
      #          tests; the bf16 whole prompt at block sizes 16/32/64 (8/4/2 copies per tile and
      #          side) and a register split that spares the producer its spill
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu and True-2-False-True-False-True" 2>&1 | tail -30 | tee "$OUT/pytest-22d.log"
      for bs in 16 32 64; do
        timeout 100 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --modes bf16 \
          --block-size $bs --settings qtma=1,producer_regs=40:consumer_regs=232,qtma=1,producer_regs=40:consumer_regs=232 \
          2>&1 | tee -a "$OUT/prefill-bs.log"
      done ;;
    round22e)  # (run on a build since reverted: the V release moved after the next S MMA, NOTES
      #          round 22) timings, then the default-setting tests
      timeout 150 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes bf16,int8_per_token_head --settings qtma=1,pingpong=1,qtma=1,split=0,qtma=1 \
        2>&1 | tee -a "$OUT/prefill-late-v.log"
      timeout 90 $PY bench/tune_hopper_prefill.py --shape 2,2048,16384,64,8,64 --shape 2,2048,0,16,4,256 \
        --modes bf16 --settings qtma=1,pingpong=1,qtma=1 2>&1 | tee -a "$OUT/prefill-late-v.log"
      timeout 200 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu and True-2-False-True-False-True" 2>&1 | tail -30 | tee "$OUT/pytest-22e.log" ;;
    round22f)  # (run on a build since reverted: the P.V wait pinned below the softmax, NOTES
      #          round 22) timings, then the tests at the default settings and with qtma off
      timeout 150 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes bf16,int8_per_token_head --settings qtma=1,pingpong=1,qtma=1,split=0,qtma=1 \
        2>&1 | tee -a "$OUT/prefill-pin.log"
      timeout 90 $PY bench/tune_hopper_prefill.py --shape 2,2048,16384,64,8,64 --shape 2,2048,0,16,4,256 \
        --modes bf16 --settings qtma=1,pingpong=1,qtma=1 2>&1 | tee -a "$OUT/prefill-pin.log"
      timeout 250 $PY -m pytest -p no:cacheprovider -q -rfE tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu and (True-2-False-True-False-True or True-2-False-True-True-False)" \
        2>&1 | tail -30 | tee "$OUT/pytest-22f.log" ;;
    round22g)  # (run on a build since reverted, with a `pin` setting: the P.V wait held below
      #          the softmax by a guarded warp sync (2) or wgmma fence (1); NOTES round 22)
      timeout 170 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --modes bf16 \
        --settings pin=0,pin=2,pin=1,pin=0,pin=2,pin=2:pingpong=1 2>&1 | tee -a "$OUT/prefill-pin2.log" ;;
    round23)  # every Hopper prefill GPU test (the post-review kernel: query prefetch removed, the
      #          epilogue's clamp gone; `pack_p`, SASS-checked only, in the last case of each shape),
      #          then alternating timings of pack_p against the default
      timeout 330 $PY -m pytest -p no:cacheprovider -q -rfE --durations=5 tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu" 2>&1 | tail -30 | tee "$OUT/pytest-23.log"
      timeout 200 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 4,512,8192,32,8,128 \
        --modes bf16,int8_per_token_head --settings pack_p=0,pack_p=1,pack_p=0,pack_p=1,pack_p=0,pack_p=1 \
        2>&1 | tee -a "$OUT/prefill-pack-p.log"
      timeout 90 $PY bench/tune_hopper_prefill.py --shape 2,2048,16384,64,8,64 --shape 2,2048,0,16,4,256 \
        --modes bf16 --settings pack_p=0,pack_p=1,pack_p=0,pack_p=1 2>&1 | tee -a "$OUT/prefill-pack-p.log" ;;
    round23b)  # with pack_p the default: every GPU test of tests/runtime (12 pytest-xdist workers:
      #           the time is kernel compiles), then the head-256 prompt alternating again
      timeout 450 $PY -m pytest -p no:cacheprovider -q -rfE -n 12 -m gpu tests/runtime 2>&1 \
        | tail -40 | tee "$OUT/pytest-all.log"
      timeout 120 $PY bench/tune_hopper_prefill.py --shape 2,2048,0,16,4,256 --shape 4,4096,0,32,8,128 \
        --modes bf16 --settings pack_p=1,pack_p=0,pack_p=1,pack_p=0,pack_p=1,pack_p=0 \
        2>&1 | tee -a "$OUT/prefill-pack-p.log" ;;
    round23suite)  # pack_p alternating once more on a fresh machine (round23b's B4 x 4096 timings
      #               spread 10%), the clocks around them, then the suite with pack_p the default
      nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$OUT/clocks.log"
      timeout 120 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 \
        --modes bf16,int8_per_token_head --settings pack_p=0,pack_p=1,pack_p=0,pack_p=1,pack_p=0,pack_p=1,pack_p=0,pack_p=1 \
        2>&1 | tee -a "$OUT/prefill-pack-p.log"
      nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$OUT/clocks.log"
      timeout 400 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r23-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r23-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r23-2026-11-29.log" ;;
    round23host)  # is the spread of the suite's host column (16-39 us on one path) the host's?
      #            the floor (add_) and the bound call alternating, 8 rounds per row
      timeout 200 $PY bench/launch_cost.py --shape 16,16384,32,8,128 --shape 64,4096,32,8,128 \
        --shape 1,32768,32,8,128 --shape 64,1024,32,8,128 --modes int8_per_token_head,bf16 --drift 8 \
        2>&1 | tee "$OUT/host-drift.log" ;;
    round23c)  # the suite's rows against the published schema, with the host floor (GPU tests of
      #         the bench), then the suite again: each decode row's host time beside the floor
      timeout 150 $PY -m pytest -p no:cacheprovider -q -rfE -m gpu tests/runtime/test_bench.py \
        tests/runtime/test_bench_schema.py 2>&1 | tail -15 | tee "$OUT/pytest-bench.log"
      timeout 400 $PY bench/bench_attention.py --out "$OUT/h200-runtime-r23c-2026-11-29.json" \
        --plot "$OUT/h200-runtime-r23c-2026-11-29.png" 2>&1 | tee "$OUT/h200-runtime-r23c-2026-11-29.log" ;;
    round23d)  # the bench tests with their schema checks: needs jsonschema and pydantic, which the
      #         GPU image lacks (install them from wheels first, PYTHONPATH set)
      timeout 200 $PY -m pytest -p no:cacheprovider -rfEs -o addopts="" -q tests/runtime/test_bench.py \
        tests/runtime/test_bench_schema.py 2>&1 | tail -15 | tee "$OUT/pytest-bench.log" ;;
    round24)  # the causal-only mask of windowless layers (`causal_mask`, SASS-checked only): the
      #        Hopper prefill GPU tests (its case is the last of each shape), then alternating
      #        timings over bf16 paged prompts of 4K and 2K tokens and the head-64/256 shapes
      timeout 300 $PY -m pytest -p no:cacheprovider -q -rfE -n 12 tests/runtime/test_attention.py \
        -k "prefill_hopper_gpu or masks_by_causality" 2>&1 | tail -30 | tee "$OUT/pytest-24.log"
      timeout 240 $PY bench/tune_hopper_prefill.py --shape 4,4096,0,32,8,128 --shape 16,2048,0,32,8,128 \
        --shape 2,2048,16384,64,8,64 --shape 2,2048,0,16,4,256 --modes bf16 \
        --settings causal_mask=0,causal_mask=1,causal_mask=0,causal_mask=1,causal_mask=0,causal_mask=1 \
        2>&1 | tee "$OUT/prefill-causal-mask.log" ;;
    round24b)  # eager prefill host time before bound prefill launches (round 24 baseline)
      timeout 120 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,1024,0,32,8,128 --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 \
        --prefill 1,4096,0,32,8,128 --prefill 1,2048,0,16,4,256 2>&1 | tee "$OUT/launch-prefill.log" ;;
    round24c)  # bound prefill launches (TMA descriptors encoded through the driver): every GPU
      #         test, then eager prefill host time bound beside the ordinary path, and decode's
      timeout 330 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log"
      timeout 150 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,1024,0,32,8,128 --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 \
        --prefill 1,4096,0,32,8,128 --prefill 1,2048,0,16,4,256 2>&1 | tee "$OUT/launch-prefill.log"
      timeout 60 $PY bench/launch_cost.py --shape 8,8192,32,8,128 --shape 1,32768,32,8,128 \
        --modes int8_per_token_head,bf16 2>&1 | tee "$OUT/launch-decode.log" ;;
    round24d)  # bound writes and prefill recorded when a signature comes back: every GPU test,
      #         then eager write and prefill host time, bound beside the ordinary path
      timeout 330 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log"
      timeout 60 $PY bench/launch_cost.py --modes bf16,fp8,int8_per_token_head,int4_per_token_head \
        --write 8 --write 64 --write 1024 2>&1 | tee "$OUT/launch-write.log"
      timeout 120 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,1024,0,32,8,128 --prefill 2,512,2048,32,8,128 --prefill 1,4096,0,32,8,128 \
        2>&1 | tee "$OUT/launch-prefill.log" ;;
    round24e)  # the bound-launch GPU tests again after round24d's three failures (a workspace's
      #         identity table made inside the recording; NaN bytes compared as values)
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound or prefill_hopper or write" 2>&1 \
        | grep -v Warning | tail -80 | tee "$OUT/pytest-bound.log" ;;
    round24f)  # bound prefill over changing token counts: the bound, prefill and write GPU tests,
      #         then a prefill loop cycling through 8 token counts, bound beside ordinary
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound or prefill or write" 2>&1 \
        | grep -v Warning | tail -60 | tee "$OUT/pytest-bound.log"
      timeout 90 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill-loop 4,512,2048,32,8,128 \
        --prefill-loop 2,1024,0,32,8,128 --prefill-loop 8,128,4096,32,8,128 2>&1 | tee "$OUT/launch-prefill-loop.log" ;;
    round24g)  # the bound-launch GPU tests after the rule that a stored signature is not recorded again
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound" 2>&1 \
        | grep -v Warning | tail -60 | tee "$OUT/pytest-bound.log" ;;
    round25)  # bound prefill over changing sequence counts (bound.PerSeq): the bound, prefill and
      #        write GPU tests, then the prefill loop (token and sequence counts change every
      #        call) and the prefill table, bound beside ordinary
      timeout 240 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound or prefill or write" 2>&1 \
        | grep -v Warning | tail -60 | tee "$OUT/pytest-bound.log"
      timeout 120 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill-loop 4,512,2048,32,8,128 \
        --prefill-loop 2,1024,0,32,8,128 --prefill-loop 8,128,4096,32,8,128 2>&1 | tee "$OUT/launch-prefill-loop.log"
      timeout 120 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 2>&1 | tee "$OUT/launch-prefill.log" ;;
    round25b)  # the prefill loop with a fixed and a changing sequence count in one process, the
      #         host floor first, and where a bound INT8 prefill call's host time goes
      timeout 150 $PY bench/launch_cost.py --floor --modes bf16,int8_per_token_head \
        --prefill-loop 4,512,2048,32,8,128 --prefill-loop 2,1024,0,32,8,128 \
        --prefill-loop 8,128,4096,32,8,128 2>&1 | tee "$OUT/launch-prefill-loop.log"
      timeout 120 $PY bench/launch_cost.py --modes int8_per_token_head --prefill 4,512,2048,32,8,128 \
        --prefill 2,1024,0,32,8,128 --profile 2>&1 | tee "$OUT/launch-prefill-profile.log" ;;
    round25c)  # TMA maps not encoded again over an unchanged address: the bound, prefill and
      #         write GPU tests, then round25b's loop and prefill table
      timeout 240 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound or prefill or write" 2>&1 \
        | grep -v Warning | tail -8 | tee "$OUT/pytest-bound.log"
      timeout 150 $PY bench/launch_cost.py --floor --modes bf16,int8_per_token_head \
        --prefill-loop 4,512,2048,32,8,128 --prefill-loop 2,1024,0,32,8,128 \
        --prefill-loop 8,128,4096,32,8,128 2>&1 | tee "$OUT/launch-prefill-loop.log"
      timeout 120 $PY bench/launch_cost.py --modes bf16,int8_per_token_head --prefill 1,256,0,32,8,128 \
        --prefill 1,2048,0,32,8,128 --prefill 2,512,2048,32,8,128 2>&1 | tee "$OUT/launch-prefill.log" ;;
    round25d)  # INT4 writes on a Gluon kernel (a row per thread, butterflies in registers): the
      #         write and bound GPU tests, then INT4 writes Triton beside Gluon, launch sweep
      timeout 240 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_attention.py \
        tests/runtime/test_write.py tests/runtime/test_bound.py -k "bound or write" 2>&1 \
        | grep -v Warning | tail -8 | tee "$OUT/pytest-write.log"
      timeout 150 $PY bench/bench_write.py --tokens 1024,8192,32768 --modes int4_per_token_head \
        --kernel triton,gluon --rows 0,64,256 --warps 0,1,2,4 2>&1 | grep -v skipped | tee "$OUT/write-int4.log"
      timeout 60 $PY bench/bench_write.py --tokens 8192,32768 --head-size 64 --modes int4_per_token_head \
        --kernel triton,gluon 2>&1 | tee -a "$OUT/write-int4.log" ;;
    round25e)  # the Gluon INT4 write kernel's loads and stores along rows (converted through shared
      #         memory) against a row per lane: its GPU tests, then both beside the Triton kernel
      #         (ran at c76ea6e; --int4-coalesced was removed in round 26)
      timeout 150 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_write.py \
        -k "int4 or bound" 2>&1 | grep -v Warning | tail -8 | tee "$OUT/pytest-write.log"
      for hs in 128 64; do
        timeout 100 $PY bench/bench_write.py --tokens 8192,32768 --head-size $hs --modes int4_per_token_head \
          --kernel triton 2>&1 | tee -a "$OUT/write-int4.log"
        timeout 100 $PY bench/bench_write.py --tokens 8192,32768 --head-size $hs --modes int4_per_token_head \
          --int4-coalesced 0,1 --warps 0,2 2>&1 | tee -a "$OUT/write-int4.log"
      done ;;
    round25f)  # every GPU test after round 25's changes, then the INT4 writes at their defaults
      #         beside the Triton kernel and the other modes' writes
      timeout 400 $PY -m pytest -q -p no:cacheprovider -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log"
      for hs in 128 64; do
        timeout 60 $PY bench/bench_write.py --tokens 64,8192,32768 --head-size $hs \
          --modes int4_per_token_head,int8_per_token_head --kernel triton, 2>&1 | tee -a "$OUT/write.log"
      done ;;
    round25g)  # where the Gluon INT4 write kernel overtakes the Triton one (token counts)
      for hs in 128 64; do
        timeout 60 $PY bench/bench_write.py --tokens 256,1024,2048,4096 --head-size $hs \
          --modes int4_per_token_head --kernel triton,gluon 2>&1 | tee -a "$OUT/write.log"
      done ;;
    round26)  # baseline before round 26's INT4 write kernel (T lanes per row): INT4 writes at heads
      #         64/128/256 with the default kernels, beside INT8 and bf16
      for hs in 64 128 256; do
        timeout 60 $PY bench/bench_write.py --tokens 8192,32768 --head-size $hs \
          --modes int4_per_token_head,int8_per_token_head,bfloat16 2>&1 | tee -a "$OUT/write.log"
      done ;;
    round26b)  # the Gluon INT4 write kernel with each row over 1, 2 or 4 lanes (64 values per lane by
      #          default; heads 64-256): its GPU tests, lane and warp sweeps, where it overtakes Triton
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_write.py \
        -k "int4 or bound" 2>&1 | grep -v Warning | tail -8 | tee "$OUT/pytest-write.log"
      timeout 90 $PY bench/bench_write.py --tokens 8192,32768 --head-size 64 --modes int4_per_token_head \
        --int4-lanes 1,2,4 --warps 2,4 2>&1 | tee -a "$OUT/write-int4.log"
      timeout 120 $PY bench/bench_write.py --tokens 8192,32768 --head-size 128 --modes int4_per_token_head \
        --int4-lanes 1,2,4 --warps 1,2,4 2>&1 | tee -a "$OUT/write-int4.log"
      timeout 120 $PY bench/bench_write.py --tokens 8192,32768 --head-size 256 --modes int4_per_token_head \
        --int4-lanes 2,4 --warps 1,2,4 2>&1 | tee -a "$OUT/write-int4.log"
      for hs in 128 256; do
        timeout 90 $PY bench/bench_write.py --tokens 64,256,1024,2048,4096 --head-size $hs \
          --modes int4_per_token_head --kernel triton,gluon 2>&1 | tee -a "$OUT/write-floor.log"
      done ;;
    round26c)  # the Gluon INT4 write kernel up to 8 lanes per row (8 lanes of 16 or 32 values: the load
      #          layout itself, no conversion): its GPU tests, lane and warp sweeps at heads 64-256
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_write.py \
        -k "int4" 2>&1 | grep -v Warning | tail -8 | tee "$OUT/pytest-write.log"
      for hl in 64:1,2,4,8 128:2,4,8 256:4,8; do
        timeout 120 $PY bench/bench_write.py --tokens 8192,32768 --head-size ${hl%:*} \
          --modes int4_per_token_head --int4-lanes ${hl#*:} --warps 1,2,4 2>&1 | tee -a "$OUT/write-int4.log"
      done ;;
    round26suite)  # round 26's suite run (INT4 writes on the Gluon kernel at every head and size), then
      #              the INT4 writes beside the Triton kernel from 64 tokens (heads 64-256)
      timeout 420 $PY bench/bench_attention.py --out "$OUT/suite.json" --plot "$OUT/suite.png" \
        2>&1 | tee "$OUT/suite.log"
      for hs in 64 128 256; do
        timeout 50 $PY bench/bench_write.py --tokens 64,256,1024,2048,4096 --head-size $hs \
          --modes int4_per_token_head --kernel triton, 2>&1 | tee -a "$OUT/write-floor.log"
      done ;;
    round26d)  # the 8-bit Gluon write kernel's launch at head 256 (rows x warps), then every GPU test
      timeout 90 $PY bench/bench_write.py --tokens 8192,32768 --head-size 256 --kernel gluon \
        --modes int8_per_token_head,fp8_per_token_head --rows 8,16,32 --warps 1,2,4 2>&1 \
        | grep -v skipped | tee "$OUT/write-256.log"
      timeout 450 $PY -m pytest -q -p no:cacheprovider -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log" ;;
    round26e)  # INT4 writes with the lane butterflies as one FMA per value, loads and stores along rows
      #          (converted) or in the compute layout: the INT4 write GPU tests, then both at heads 64-256
      #          (ran at 36f9ea6; --int4-coalesced was removed after it)
      timeout 200 $PY -m pytest -q -p no:cacheprovider -rfE -n 12 -m gpu tests/runtime/test_write.py \
        -k "int4" 2>&1 | grep -v Warning | tail -8 | tee "$OUT/pytest-write.log"
      for rep in 1 2; do
        for hs in 64 128 256; do
          timeout 60 $PY bench/bench_write.py --tokens 8192,32768 --head-size $hs \
            --modes int4_per_token_head --int4-coalesced 1,0 2>&1 | tee -a "$OUT/write-int4.log"
        done
      done ;;
    round26f)  # INT4 writes loaded and stored in the compute layout (the default now): every GPU
      #          test, then INT4 writes at heads 64-256 beside the Triton kernel, 64 to 32768 tokens
      timeout 450 $PY -m pytest -q -p no:cacheprovider -n 12 -m gpu tests/runtime 2>&1 | tail -25 | tee "$OUT/pytest.log"
      for hs in 64 128 256; do
        timeout 50 $PY bench/bench_write.py --tokens 64,1024,4096,8192,32768 --head-size $hs \
          --modes int4_per_token_head --kernel triton, 2>&1 | tee -a "$OUT/write-int4.log"
      done ;;
    round14tests)  # the GPU tests of round 14 (after the suite, same machine)
      timeout 560 $PY -m pytest -p no:cacheprovider -rfE tests/runtime/test_attention.py \
        tests/runtime/test_bench.py -k "prefill or cached_launch or gpu_decode_and_prefill_large or bench_decode_shape or gluon_bf16 or split or dependent" \
        2>&1 | tee "$OUT/pytest.log" ;;
    write)
      timeout 120 $PY bench/bench_write.py --tokens 8192,32768 --rows 0,4,8 --warps 1,2,4 \
        2>&1 | tee "$OUT/write.log" ;;
  esac
done
grep -h "^BEST\|sdpa bf16\|passed\|failed" "$OUT"/*.log 2>/dev/null | cut -c1-220
