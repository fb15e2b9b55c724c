// The tiled attention kernel (attention_tiled.h) on 16-float AVX-512 vectors (compiled with -mavx512f -mfma; run
// only when CPUID reports AVX-512F). 32 vector registers: scores 8 keys x 2 row vectors (16 accumulators), P.V
// 4 rows x 4 vectors (a whole 64-wide head per block).
#define EF_ATTN_W 16
#define EF_ATTN_RK 8
#define EF_ATTN_NB 2
#define EF_ATTN_RP 4
#define EF_ATTN_NC 4
#include "attention_tiled.h"

namespace edgeflow {
void attention_item_avx512(const AttentionArgs& a, const AttentionItem& it) { run_item(a, it); }
}  // namespace edgeflow
