// edgeflow-llama-scorer: llama.cpp's own forward pass as a log-probability server, so lm-eval's requests and the
// fidelity windows are scored by llama.cpp over the same GGUF its TTFT loads (harness/systems/llamacpp_scorer.py).
// Built against the vendored llama.cpp's public API (llama.h) and static libraries by
// harness/systems/llamacpp_build.py.
//
//   edgeflow-llama-scorer MODEL.gguf N_CTX THREADS EXTRA_BUFFERS
//
// EXTRA_BUFFERS 1 lets llama.cpp put weights in its extra buffer types (AMX, repacked blocks), 0 keeps them in the
// mmap'ed GGUF (llama-completion's --no-repack): the kernel path harness/systems/llamacpp_probe.py chose.
//
// Binary protocol on stdin/stdout, little-endian int32 / float32:
//   ready     -> int32 n_vocab                                  (after the model and context are loaded)
//   request   <- int32 n, int32 last, int32 keep, n x int32 token ids
//                (n = 0 ends the process; 1 <= last <= n; keep + n <= N_CTX)
//   response  -> int32 status; status 0: last x n_vocab float32 log-probabilities, row j = the distribution of the
//                token after the request's token n - last + j; status > 0: that many bytes of error text
// keep = 0 starts from an empty KV cache. keep > 0 keeps the first `keep` positions of the sequence the previous
// requests built (keep <= its length) and decodes the n tokens at positions keep .. keep + n - 1: lm-eval's
// multiple-choice endings after a context decoded once. The tokens are decoded as one batch (n_batch = n_ubatch =
// N_CTX).
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

bool read_exact(void* dst, size_t bytes) { return std::fread(dst, 1, bytes, stdin) == bytes; }

void write_exact(const void* src, size_t bytes) {
    if (std::fwrite(src, 1, bytes, stdout) != bytes) std::exit(3);  // the reader went away
}

void write_error(const std::string& text) {
    const int32_t len = static_cast<int32_t>(text.size());
    write_exact(&len, sizeof len);
    write_exact(text.data(), text.size());
    std::fflush(stdout);
}

// logits [n_vocab] -> log_softmax in place, accumulated in double (the vocabulary is ~50k entries).
void log_softmax(float* row, int n_vocab) {
    float peak = row[0];
    for (int i = 1; i < n_vocab; ++i) peak = row[i] > peak ? row[i] : peak;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i] - peak));
    const float shift = peak + static_cast<float>(std::log(sum));
    for (int i = 0; i < n_vocab; ++i) row[i] -= shift;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s MODEL.gguf N_CTX THREADS EXTRA_BUFFERS\n", argv[0]);
        return 2;
    }
    const int n_ctx = std::atoi(argv[2]);
    const int threads = std::atoi(argv[3]);
    const std::string extra_buffers = argv[4];
    if (n_ctx < 1 || threads < 1 || (extra_buffers != "0" && extra_buffers != "1")) {
        std::fprintf(stderr, "N_CTX and THREADS must be positive and EXTRA_BUFFERS 0 or 1, got %s, %s and %s\n",
                     argv[2], argv[3], argv[4]);
        return 2;
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    llama_model_params mparams = llama_model_default_params();
    mparams.use_extra_bufts = extra_buffers == "1";
    llama_model* model = llama_model_load_from_file(argv[1], mparams);
    if (model == nullptr) {
        std::fprintf(stderr, "llama.cpp could not load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = static_cast<uint32_t>(n_ctx);
    cparams.n_batch = cparams.n_ubatch = static_cast<uint32_t>(n_ctx);
    cparams.n_threads = cparams.n_threads_batch = threads;
    cparams.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cparams);
    if (ctx == nullptr) {
        std::fprintf(stderr, "llama.cpp could not create a context of %d tokens\n", n_ctx);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const int ctx_cells = static_cast<int>(llama_n_ctx(ctx));  // llama.cpp may round the context up
    write_exact(&n_vocab, sizeof n_vocab);
    std::fflush(stdout);

    std::vector<float> rows;
    int32_t held = 0;  // positions the KV cache holds for the sequence being built
    for (;;) {
        int32_t head[3];
        if (!read_exact(head, sizeof head)) break;  // EOF: the client closed
        const int32_t n = head[0], last = head[1], keep = head[2];
        if (n == 0) break;
        if (n < 0 || keep < 0 || keep + n > ctx_cells || last < 1 || last > n) {
            write_error("bad request: n=" + std::to_string(n) + " last=" + std::to_string(last) + " keep=" +
                        std::to_string(keep) + " (context " + std::to_string(ctx_cells) + ")");
            return 1;  // the stream is out of step: nothing after this can be trusted
        }
        llama_batch batch = llama_batch_init(n, 0, 1);
        if (!read_exact(batch.token, sizeof(int32_t) * n)) return 1;
        bool ids_ok = true;
        for (int32_t i = 0; i < n; ++i) {
            ids_ok = ids_ok && batch.token[i] >= 0 && batch.token[i] < n_vocab;
            batch.pos[i] = keep + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i >= n - last;
        }
        batch.n_tokens = n;
        const bool keep_ok = keep <= held;
        if (keep == 0) {
            llama_memory_clear(llama_get_memory(ctx), true);
        } else if (keep_ok) {
            llama_memory_seq_rm(llama_get_memory(ctx), 0, keep, -1);  // drop the previous continuation
        }
        const int32_t rc = ids_ok && keep_ok ? llama_decode(ctx, batch) : -1;
        if (rc != 0) {
            write_error(!ids_ok    ? "a token id is outside the vocabulary of " + std::to_string(n_vocab)
                        : !keep_ok ? "cannot keep " + std::to_string(keep) + " positions of a sequence of " +
                                         std::to_string(held)
                                   : "llama_decode returned " + std::to_string(rc));
            if (keep_ok) held = keep;  // what the clear or seq_rm above left
            llama_batch_free(batch);
            continue;
        }
        held = keep + n;
        rows.resize(static_cast<size_t>(last) * n_vocab);
        for (int32_t j = 0; j < last; ++j) {
            const float* logits = llama_get_logits_ith(ctx, n - last + j);
            float* row = rows.data() + static_cast<size_t>(j) * n_vocab;
            std::copy(logits, logits + n_vocab, row);
            log_softmax(row, n_vocab);
        }
        llama_batch_free(batch);
        const int32_t ok = 0;
        write_exact(&ok, sizeof ok);
        write_exact(rows.data(), sizeof(float) * rows.size());
        std::fflush(stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
