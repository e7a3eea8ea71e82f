// Starter: one warp per (sequence, query head). The 32 lanes split head_dim (each holds up to 4 of
// its elements of q and of the output accumulator); for each token of the context the warp looks up
// the token's page in the block table, computes the score with a shuffle reduction and updates an
// online softmax: m is the running maximum score, l the running sum of exp(score - m), acc the
// running sum of exp(score - m) * v. Correct for head_dim <= 128, but slow: one token at a time, the
// query heads of a group each re-read their kv head's keys and values, and a long context runs on
// one warp while most of the GPU idles. A fast kernel splits long contexts over many blocks.
#include <cuda_bf16.h>
#include <cstdint>

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 4;  // head_dim <= 32 * 4

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void paged_decode_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                           const __nv_bfloat16* v_cache, const int32_t* block_table,
                                           const int32_t* seq_lens, __nv_bfloat16* out, int batch, int heads,
                                           int kv_heads, int head_dim, int block_size, int pages_per_seq,
                                           float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;  // batch * heads + head
    if (row >= (int64_t)batch * heads) return;
    const int b = (int)(row / heads), kv = (int)(row % heads) / (heads / kv_heads);
    const int len = seq_lens[b];
    float qr[kMaxPerLane], acc[kMaxPerLane];
    for (int i = 0; i < kMaxPerLane; ++i) {
        const int c = lane + 32 * i;
        qr[i] = c < head_dim ? __bfloat162float(q[row * head_dim + c]) * scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int t = 0; t < len; ++t) {
        const int64_t page = block_table[(int64_t)b * pages_per_seq + t / block_size];
        // Row t % block_size of that page, kv head kv.
        const int64_t offset = ((page * block_size + t % block_size) * kv_heads + kv) * head_dim;
        float s = 0.0f;
        for (int i = 0; i < kMaxPerLane; ++i) {
            const int c = lane + 32 * i;
            if (c < head_dim) s += qr[i] * __bfloat162float(k_cache[offset + c]);
        }
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float m_new = fmaxf(m, s);
        const float alpha = expf(m - m_new);  // rescales what was summed under the old maximum
        const float p = expf(s - m_new);
        l = l * alpha + p;
        for (int i = 0; i < kMaxPerLane; ++i) {
            const int c = lane + 32 * i;
            if (c < head_dim) acc[i] = acc[i] * alpha + p * __bfloat162float(v_cache[offset + c]);
        }
        m = m_new;
    }
    for (int i = 0; i < kMaxPerLane; ++i) {
        const int c = lane + 32 * i;
        if (c < head_dim) out[row * head_dim + c] = __float2bfloat16(acc[i] / l);
    }
}

extern "C" void solution(const __nv_bfloat16* q, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                         const int32_t* block_table, const int32_t* seq_lens, __nv_bfloat16* out, int batch,
                         int heads, int kv_heads, int head_dim, int block_size, int max_seq, cudaStream_t stream) {
    const int64_t rows = (int64_t)batch * heads;
    if (rows <= 0) return;
    const int pages_per_seq = (max_seq + block_size - 1) / block_size;
    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    paged_decode_kernel<<<(unsigned)blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        q, k_cache, v_cache, block_table, seq_lens, out, batch, heads, kv_heads, head_dim, block_size,
        pages_per_seq, 1.0f / sqrtf((float)head_dim));
}
