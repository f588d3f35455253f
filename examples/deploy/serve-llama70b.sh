#!/usr/bin/env bash
# Llama 3.1 70B FP8 (ModelOpt, calibrated FP8 KV scales) on 4 GPUs.
set -euo pipefail

MODEL=nvidia/Llama-3.1-70B-Instruct-FP8
export VLLM_LOGGING_LEVEL=INFO

exec vllm serve "$MODEL" \
  --tensor-parallel-size 4 \
  --kv-cache-dtype bfloat16 \
  --max-model-len 65536 \
  --gpu-memory-utilization 0.92 \
  --port 8000
