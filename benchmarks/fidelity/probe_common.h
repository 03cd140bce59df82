// Shared by ctx_probe.cpp and lockstep_probe.cpp: a model loaded on the CPU and a context set up the way
// llama-bench sets them up (tools/llama-bench/llama-bench.cpp: model and context default params, -ngl 0,
// n_batch = n_ubatch, flash-attn on or off), with llama.cpp's log silenced.
#pragma once
#include "ggml-backend.h"
#include "llama.h"

#include <cstdio>

static void probe_quiet_log(ggml_log_level, const char *, void *) {}

static llama_model * probe_load_model(const char * path) {
    llama_log_set(probe_quiet_log, nullptr);
    ggml_backend_load_all();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = 0;
    llama_model * model   = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", path);
    }
    return model;
}

static llama_context_params probe_context_params(int n_ctx, int n_batch, bool flash_attn) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx                = n_ctx;
    cp.n_batch = cp.n_ubatch = n_batch;
    cp.flash_attn_type       = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    return cp;
}
