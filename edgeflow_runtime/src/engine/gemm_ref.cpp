#include "gemm.h"

namespace edgeflow {

void gemm_s8_ref(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) {
            int32_t s = 0;
            for (int k = 0; k < K; ++k) s += int32_t(a[t * lda + k]) * int32_t(b[c * ldb + k]);
            y[t * ldy + c] = s;
        }
}

}  // namespace edgeflow
