// ctx_probe: decode speed at a FIXED depth as a function of the context size (n_ctx) and flash-attn.
//
// Prefills a 128-token prompt, then times 64 single-token llama_decode + llama_synchronize steps (the same
// loop as llama-bench's test_gen and edgeprof's worker), at depth 128..191, and prints the median t/s over
// ITERS repetitions. Built and driven by benchmarks/ctx_effect.py against the llama.cpp built by
// build_llama_bench.sh.
//
// usage: ctx_probe MODEL N_CTX FLASH_ATTN(0|1) [ITERS=6] [THREADS=2]
#include "probe_common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL N_CTX FLASH_ATTN(0|1) [ITERS] [THREADS]\n", argv[0]);
        return 2;
    }
    const char * path    = argv[1];
    const int    n_ctx   = atoi(argv[2]);
    const int    fa      = atoi(argv[3]);
    const int    iters   = argc > 4 ? atoi(argv[4]) : 6;
    const int    threads = argc > 5 ? atoi(argv[5]) : 2;
    const int    n_depth = 128, n_gen = 64;

    llama_model * model = probe_load_model(path);
    if (!model) {
        return 1;
    }
    llama_context_params cp = probe_context_params(n_ctx, 512, fa != 0);
    cp.n_threads = cp.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create context\n");
        return 1;
    }
    const llama_vocab * vocab   = llama_model_get_vocab(model);
    const int           n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<double> tps;
    for (int it = 0; it <= iters; it++) {  // iteration 0 is a warm-up
        llama_memory_clear(llama_get_memory(ctx), true);
        std::vector<llama_token> prompt(n_depth);
        prompt[0] = llama_vocab_bos(vocab);
        for (int i = 1; i < n_depth; i++) {
            prompt[i] = rand() % n_vocab;
        }
        llama_decode(ctx, llama_batch_get_one(prompt.data(), n_depth));
        llama_synchronize(ctx);
        llama_token tok = llama_vocab_bos(vocab);
        const auto  t0  = std::chrono::steady_clock::now();
        for (int i = 0; i < n_gen; i++) {
            llama_decode(ctx, llama_batch_get_one(&tok, 1));
            llama_synchronize(ctx);
            tok = rand() % n_vocab;
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (it > 0) {
            tps.push_back(n_gen / s);
        }
    }
    std::sort(tps.begin(), tps.end());
    printf("%.2f\n", tps[tps.size() / 2]);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
