#include "gemm16.h"

namespace edgeflow {

void gemm_s16_ref(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy) {
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) {
            int64_t s = 0;
            for (int k = 0; k < K; ++k) s += int64_t(a[std::size_t(t) * lda + k]) * int64_t(b[std::size_t(c) * ldb + k]);
            y[std::size_t(t) * ldy + c] = s;
        }
}

}  // namespace edgeflow
