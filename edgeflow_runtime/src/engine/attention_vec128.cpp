// The tiled attention kernel (attention_tiled.h) on 4-float vectors in the baseline ISA: SSE2 on x86-64 (no FMA), Neon
// on aarch64 (fmla). Blocks sized for 16 registers: scores 4 keys x 2 row vectors, P.V 4 rows x 2 vectors.
#define EF_ATTN_W 4
#define EF_ATTN_RK 4
#define EF_ATTN_NB 2
#define EF_ATTN_RP 4
#define EF_ATTN_NC 2
#include "attention_tiled.h"

namespace edgeflow {
void attention_item_vec128(const AttentionArgs& a, const AttentionItem& it) { run_item(a, it); }
}  // namespace edgeflow
