// lockstep_probe: llama-bench's tg test (`-n N_GEN -d N_DEPTH`), one rep per "go" line on stdin.
//
// The context, the threadpool and the decode loop are set up as llama-bench sets them up (context default
// params + n_ctx = depth + gen, n_batch/n_ubatch, f16 KV, a ggml threadpool with poll 50 attached to the
// context, llama_process on an extended batch, llama_synchronize after every token, a random next token,
// the depth computed once and restored for each rep). Driven by benchmarks/lockstep.py, which alternates
// its reps with edgeprof's worker so that both are timed within a fraction of a second of each other.
//
// protocol: prints "ready" once loaded and warmed up; then for each "go" line prints one line of four t/s:
// tg by the wall clock around the N_GEN decodes (as llama-bench times them), tg by llama.cpp's own t_eval
// counter (as edgeprof times them), and the same two for the prefill of the depth (llama-bench's pp test
// of N_DEPTH tokens; 0 when the depth was restored); "quit" or EOF ends it. With PREFILL=1 each rep computes
// the depth again instead of restoring it (as edgeprof's request does: in lock-step the other process runs
// between two reps, so a restore would start the decode with cold caches that a prefill has warmed).
//
// usage: lockstep_probe MODEL N_DEPTH N_GEN FLASH_ATTN(0|1) THREADS N_BATCH [PREFILL(0|1)]
#include "ggml-cpu.h"
#include "probe_common.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static bool decode_one(llama_context * ctx, llama_batch_ext * batch, llama_token tok, llama_pos pos) {
    llama_batch_ext_clear(batch);
    const int32_t idx = llama_batch_ext_add_token(batch, 0, tok);
    if (idx < 0) {
        return false;
    }
    llama_batch_ext_set_pos(batch, idx, &pos);
    llama_batch_ext_set_output_logits(batch, idx, true);
    if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch) != 0) {
        return false;
    }
    llama_synchronize(ctx);
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s MODEL N_DEPTH N_GEN FLASH_ATTN(0|1) THREADS N_BATCH\n", argv[0]);
        return 2;
    }
    const char * path    = argv[1];
    const int    n_depth = atoi(argv[2]);
    const int    n_gen   = atoi(argv[3]);
    const int    fa      = atoi(argv[4]);
    const int    threads = atoi(argv[5]);
    const int    n_batch = atoi(argv[6]);
    const bool   prefill = argc > 7 && atoi(argv[7]) != 0;

    llama_model * model = probe_load_model(path);
    if (!model) {
        return 1;
    }
    llama_context_params cp = probe_context_params(n_depth + n_gen, n_batch, fa != 0);
    cp.swa_full              = false;
    cp.no_perf               = false;  // llama-bench leaves the counters off; here they are half the output
    llama_context * ctx      = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create context\n");
        return 1;
    }
    ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    tpp.poll                   = 50;
    ggml_threadpool * pool     = ggml_threadpool_new(&tpp);
    llama_attach_threadpool(ctx, pool, nullptr);
    llama_set_n_threads(ctx, threads, threads);

    const llama_vocab * vocab   = llama_model_get_vocab(model);
    const int           n_vocab = llama_vocab_n_tokens(vocab);
    const bool          bos     = llama_vocab_get_add_bos(vocab);
    llama_batch_ext *   one     = llama_batch_ext_init(ctx);

    // the depth, computed once (llama-bench's first rep) and restored before every rep
    std::vector<llama_token> prompt(n_depth);
    for (int i = 0; i < n_depth; i++) {
        prompt[i] = (i == 0 && bos) ? llama_vocab_bos(vocab) : rand() % n_vocab;
    }
    llama_batch_ext * big = llama_batch_ext_init(ctx);
    auto fill_depth = [&]() {
        llama_batch_ext_clear(big);
        for (int i = 0; i < n_depth; i++) {
            const int32_t idx = llama_batch_ext_add_token(big, 0, prompt[i]);
            llama_pos     pos = i;
            llama_batch_ext_set_pos(big, idx, &pos);
            llama_batch_ext_set_output_logits(big, idx, i == n_depth - 1);
        }
        const bool ok = llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, big) == 0;
        llama_synchronize(ctx);
        return ok;
    };
    if (!fill_depth()) {
        fprintf(stderr, "depth prefill failed\n");
        return 1;
    }
    std::vector<uint8_t> state(llama_state_seq_get_size(ctx, 0));
    llama_state_seq_get_data(ctx, state.data(), state.size(), 0);
    // llama-bench's warm-up: one generated token
    if (!decode_one(ctx, one, bos ? llama_vocab_bos(vocab) : rand() % n_vocab, n_depth)) {
        fprintf(stderr, "warm-up decode failed\n");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);

    char line[64];
    while (fgets(line, sizeof line, stdin) && strncmp(line, "go", 2) == 0) {
        llama_memory_clear(llama_get_memory(ctx), false);
        double pp_wall = 0.0, pp_counter = 0.0;
        if (prefill) {
            llama_perf_context_reset(ctx);
            const auto p0 = std::chrono::steady_clock::now();
            fill_depth();
            pp_wall = n_depth / std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
            const double t_p_eval_ms = llama_perf_context(ctx).t_p_eval_ms;
            pp_counter = t_p_eval_ms > 0 ? n_depth * 1000.0 / t_p_eval_ms : 0.0;
        } else {
            llama_state_seq_set_data(ctx, state.data(), state.size(), 0);
        }
        llama_perf_context_reset(ctx);
        llama_token tok = bos ? llama_vocab_bos(vocab) : rand() % n_vocab;
        llama_pos   pos = llama_memory_seq_pos_max(llama_get_memory(ctx), 0) + 1;
        const auto  t0  = std::chrono::steady_clock::now();
        for (int i = 0; i < n_gen; i++) {
            if (!decode_one(ctx, one, tok, pos++)) {
                fprintf(stderr, "decode failed\n");
                return 1;
            }
            tok = rand() % n_vocab;
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double t_eval_ms = llama_perf_context(ctx).t_eval_ms;
        printf("%.3f %.3f %.3f %.3f\n", n_gen / s, t_eval_ms > 0 ? n_gen * 1000.0 / t_eval_ms : 0.0, pp_wall,
               pp_counter);
        fflush(stdout);
    }
    llama_batch_ext_free(one);
    llama_batch_ext_free(big);
    llama_free(ctx);
    ggml_threadpool_free(pool);
    llama_model_free(model);
    return 0;
}
